"""Fixtures shared by every test: real photos, the shared evaluation folder, the built-in models.

Every test sees a model store holding exactly the downloaded built-ins (``builtin_store``, also the session's
``PORTRAIT_MODEL_STORE``, so code that opens the store from the settings sees it too): what a developer pulled beside
them never changes an answer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("PORTRAIT_SHARED_DIR", REPO_ROOT.parent / "shared"))  # a worktree elsewhere names it


# The developer's store (``PORTRAIT_MODEL_STORE`` as the session starts, else ./models): the source of the links.
_DEVELOPER_STORE = Path(os.environ.get("PORTRAIT_MODEL_STORE", REPO_ROOT / "models"))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``../shared`` beside the checkout; tests that need it skip on a plain clone."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is absent (a plain clone has no evaluation files)")
    return SHARED_DIR


def _builtin_specs(*, derived: bool) -> dict[str, dict]:
    manifest = yaml.safe_load((REPO_ROOT / "configs" / "models.yaml").read_text(encoding="utf-8"))["models"]
    return {name: e for name, e in manifest.items() if e.get("builtin") and bool(e.get("derive")) == derived}


def _link_builtins(root: Path, entries: dict[str, dict], *, required: bool = True) -> None:
    """Link each entry's file (and its record) from the developer's store into ``root``; fail if one is absent
    (``required``), else leave it out."""
    source = _DEVELOPER_STORE
    for name, entry in entries.items():
        if not required and not (source / entry["file"]).is_file():
            continue
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


@pytest.fixture(scope="session", autouse=True)
def builtin_store(tmp_path_factory) -> Iterator[Path]:
    """A model store holding exactly the downloaded built-ins (``portrait models pull --builtin`` puts them in
    ``./models``), so tests see the same models before and after `make run` fetched more; the process default while
    tests run. The converted Real-ESRGAN is left out (on a CPU it takes seconds per small photo): tests that want it
    use ``realesrgan_builtin_store``."""
    from deployments.common.settings import get_model_settings
    from serve_app.settings import get_settings

    root = tmp_path_factory.mktemp("builtin-models")
    _link_builtins(root, _builtin_specs(derived=False), required=False)  # mediapipe_dir says what is missing
    before = os.environ.get("PORTRAIT_MODEL_STORE")
    os.environ["PORTRAIT_MODEL_STORE"] = str(root)
    get_model_settings.cache_clear()
    get_settings.cache_clear()
    yield root
    if before is None:
        os.environ.pop("PORTRAIT_MODEL_STORE", None)
    else:
        os.environ["PORTRAIT_MODEL_STORE"] = before
    get_model_settings.cache_clear()
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def mediapipe_dir(builtin_store) -> Path:
    """``mediapipe/`` of ``builtin_store``; fails naming the command when the built-ins were never fetched."""
    folder = builtin_store / "mediapipe"
    if not (folder / "face_detection_short_range.tflite").is_file():
        pytest.fail(f"built-in models missing under {_DEVELOPER_STORE}: run `portrait models pull --builtin`")
    return folder


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
