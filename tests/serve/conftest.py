"""One Ray Serve application per test session, deployed from ``configs/local.yaml`` the way ``serve run`` does.

Ray on a 2-core box: 2 CPUs, no dashboard, a small object store, 127.0.0.1 only, and ``ray.shutdown()`` at the end
(skipping ``serve.shutdown()`` saves seconds). Tests that need a model checkpoint add it to ``serve_model_store``.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import httpx
import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT_S = 180

RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_DEDUP_LOGS": "0",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_config(port: int, env_vars: dict[str, str], args: dict) -> dict:
    """``configs/local.yaml`` with the test's port, environment and application args."""
    config = yaml.safe_load((REPO_ROOT / "configs" / "local.yaml").read_text(encoding="utf-8"))
    config["http_options"] = {**config.get("http_options", {}), "host": "127.0.0.1", "port": port}
    app = config["applications"][0]
    app["args"] = {**(app.get("args") or {}), **args}
    app["runtime_env"] = {"env_vars": env_vars}
    return config


# A GPEN small enough for CPU tests: same architecture family, 32 px, a few channels; random weights.
TINY_GPEN = {"size": 32, "style_dim": 16, "n_mlp": 1, "channel_multiplier": 1, "narrow": 1 / 32}


@pytest.fixture(scope="session")
def serve_model_store(tmp_path_factory) -> tuple[Path, Path]:
    """(store root, manifest) for the Serve session: the built-in models linked in, plus a tiny generated GPEN
    standing in for ``gpen-bfr-512`` (pinned by its sha256 in a copy of the manifest). ``gpen-bfr-256`` stays
    absent, so that deployment serves the classic engine."""
    import torch

    from deployments.common.weights import sha256_of
    from deployments.restore.gpen import GpenConfig, build_gpen

    root = tmp_path_factory.mktemp("serve-models")
    builtin = Path(os.environ.get("PORTRAIT_MODEL_STORE", REPO_ROOT / "models")) / "mediapipe"
    (root / "mediapipe").symlink_to(builtin, target_is_directory=True)
    torch.manual_seed(0)
    checkpoint = root / "gpen" / "GPEN-BFR-512.pth"
    checkpoint.parent.mkdir()
    torch.save(build_gpen(GpenConfig(**TINY_GPEN)).state_dict(), checkpoint)
    manifest = yaml.safe_load((REPO_ROOT / "configs" / "models.yaml").read_text(encoding="utf-8"))
    entry = manifest["models"]["gpen-bfr-512"]
    entry.update(sha256=sha256_of(checkpoint), size_bytes=checkpoint.stat().st_size, args=TINY_GPEN)
    manifest_path = root / "models.yaml"
    manifest_path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    return root, manifest_path


@pytest.fixture(scope="session")
def serve_app_args() -> dict:
    return {}


@pytest.fixture(scope="session")
def serve_url(serve_model_store, serve_app_args) -> str:
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    os.environ.update(RAY_ENV)
    port = _free_port()
    store_root, manifest = serve_model_store
    env_vars = {**RAY_ENV, "PORTRAIT_MODEL_STORE": str(store_root), "PORTRAIT_MODELS_MANIFEST": str(manifest)}
    config = ServeDeploySchema.model_validate(serve_config(port, env_vars, serve_app_args))
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=200 * 1024 * 1024,
        runtime_env={"env_vars": env_vars},
    )
    try:
        client = serve_api.serve_start(http_options=config.http_options.model_dump(), proxy_location="HeadOnly")
        client.deploy_apps(config, _blocking=False)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url)
        yield url
    finally:
        ray.shutdown()


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{url}/healthz", timeout=10)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1)
    raise RuntimeError(f"the Serve application did not become healthy in {STARTUP_TIMEOUT_S}s: {last}")
