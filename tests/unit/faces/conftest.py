"""Face-analysis fixtures: one engine per session (models load once), with MTCNN when its weights are present."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor


@pytest.fixture(scope="session")
def mtcnn_dir(mediapipe_dir) -> Path:
    """Folder of MTCNN's ``pnet.pt``/``rnet.pt``/``onet.pt`` (``portrait models pull --builtin`` puts them there)."""
    folder = mediapipe_dir.parent / "mtcnn"
    if not (folder / "onet.pt").is_file():
        pytest.fail(f"built-in MTCNN weights missing under {folder}: run `portrait models pull --builtin`")
    return folder


@pytest.fixture(scope="session")
def engine(mediapipe_dir, mtcnn_dir) -> FaceAnalysisPredictor:
    return FaceAnalysisPredictor(mediapipe_dir, FaceAnalysisConfig(), mtcnn_dir=mtcnn_dir)
