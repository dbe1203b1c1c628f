"""Fixtures shared by every test: real photos, the shared evaluation folder, the built-in models."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

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


def _builtin_specs(*, derived: bool) -> dict[str, dict]:
    manifest = yaml.safe_load((REPO_ROOT / "configs" / "models.yaml").read_text(encoding="utf-8"))["models"]
    return {name: e for name, e in manifest.items() if e.get("builtin") and bool(e.get("derive")) == derived}


def _link_builtins(root: Path, entries: dict[str, dict]) -> None:
    """Link each entry's file (and its record) from the developer's store into ``root``; fail if one is absent."""
    source = _model_store_root()
    for name, entry in entries.items():
        for suffix in ("", ".source.json"):
            origin = source / (entry["file"] + suffix)
            if suffix == "" and not origin.is_file():
                pytest.fail(
                    f"built-in {name} missing at {origin}: run `portrait models pull --builtin` (make test does)"
                )
            if origin.is_file():
                link = root / (entry["file"] + suffix)
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(origin)


@pytest.fixture(scope="session")
def mediapipe_dir(tmp_path_factory) -> Path:
    """``mediapipe/`` of a model store holding exactly the downloaded built-ins (``portrait models pull --builtin``
    puts them in ``./models``), so tests see the same models before and after `make run` fetched more. The converted
    Real-ESRGAN is left out (on a CPU it takes seconds per small photo): tests that want it use
    ``realesrgan_builtin_store``."""
    root = tmp_path_factory.mktemp("builtin-models")
    _link_builtins(root, _builtin_specs(derived=False))
    return root / "mediapipe"


@pytest.fixture(scope="session")
def realesrgan_builtin_store(tmp_path_factory) -> Path:
    """A model store root holding every built-in, the converted Real-ESRGAN and its ncnn inputs included."""
    root = tmp_path_factory.mktemp("builtin-models-realesrgan")
    _link_builtins(root, _builtin_specs(derived=False))
    derived = _builtin_specs(derived=True)
    _link_builtins(root, derived)
    inputs = {f"{name}:{item['file']}": item for name, e in derived.items() for item in e["derive"]["inputs"]}
    _link_builtins(root, inputs)
    return root


@pytest.fixture(scope="session")
def astronaut_rgb() -> np.ndarray:
    """A real 512x512 RGB portrait (image contract: HxWx3 uint8 RGB)."""
    from skimage import data

    return np.ascontiguousarray(data.astronaut())
