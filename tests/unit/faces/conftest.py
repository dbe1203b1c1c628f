"""Face-analysis fixtures: one engine per session (models load once), reference astronaut geometry."""

from __future__ import annotations

import pytest

from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalyzerEngine


@pytest.fixture(scope="session")
def engine(mediapipe_dir) -> FaceAnalyzerEngine:
    return FaceAnalyzerEngine(mediapipe_dir, FaceAnalysisConfig())
