"""Fixtures shared by every test: real photos, the shared evaluation folder, the built-in models."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


def _model_store_root() -> Path:
    return Path(os.environ.get("PORTRAIT_MODEL_STORE", REPO_ROOT / "models"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; tests that need it skip on a plain clone."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is absent (a plain clone has no evaluation files)")
    return SHARED_DIR


@pytest.fixture(scope="session")
def mediapipe_dir() -> Path:
    """Folder holding the built-in MediaPipe ``.tflite`` files (``portrait models pull --builtin`` puts them there)."""
    folder = _model_store_root() / "mediapipe"
    if not (folder / "face_detection_short_range.tflite").is_file():
        pytest.fail(f"built-in models missing under {folder}: run `portrait models pull --builtin` (make test does)")
    return folder


@pytest.fixture(scope="session")
def astronaut_rgb() -> np.ndarray:
    """A real 512x512 RGB portrait (image contract: HxWx3 uint8 RGB)."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut())
