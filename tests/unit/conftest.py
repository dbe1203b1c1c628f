"""Fixtures of the unit tests that run the generative stages in this process."""

from __future__ import annotations

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture(scope="session")
def generative_backend(builtin_store, tmp_path_factory):
    """The in-process stages over a store holding the built-ins (linked from the session's) and the Renderer's tiny
    random SDXL parts (tests/unit/render/tiny_sdxl.py) under the shipped manifest's names, pulled from a folder
    mirror through the manifest."""
    pytest.importorskip("diffusers")
    from deployments.common.download import pull
    from deployments.common.weights import ModelStore, load_manifest
    from serve_app.local_backend import in_process_backend
    from tests.unit.render.tiny_sdxl import SHIPPED_PARTS, as_shipped, build_mirror

    mirror = tmp_path_factory.mktemp("generative-mirror")
    build_mirror(mirror)
    manifest = load_manifest(as_shipped(mirror, REPO_ROOT / "configs" / "models.yaml"))
    root = tmp_path_factory.mktemp("generative-store") / "store"
    root.mkdir()
    for child in builtin_store.iterdir():
        (root / child.name).symlink_to(child)
    store = ModelStore(str(root), manifest)
    outcomes = pull(store, list(SHIPPED_PARTS), mirror=str(mirror))
    assert [outcome.error for outcome in outcomes] == [None] * len(SHIPPED_PARTS)
    return in_process_backend(store)
