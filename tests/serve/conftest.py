"""One Ray Serve application per test session, deployed from ``configs/local.yaml`` the way ``serve run`` does.

Ray on a 2-core box: 2 CPUs, no dashboard, a small object store, 127.0.0.1 only, and ``ray.shutdown()`` at the end
(skipping ``serve.shutdown()`` saves seconds). Tests that need a model checkpoint add it to ``serve_model_store``.
"""

from __future__ import annotations

import io
import os
import socket
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml

from tests.tf_graph import dctnet_graph

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
    for deployment in app["deployments"]:
        if deployment["name"] == "Renderer":  # batched here (1 on a CPU in local.yaml): one call per compatible group
            deployment["user_config"] = {"max_batch_size": 4, "batch_wait_timeout_s": 0.5}
    return config


# A GPEN small enough for CPU tests: same architecture family, 32 px, a few channels; random weights.
TINY_GPEN = {"size": 32, "style_dim": 16, "n_mlp": 1, "channel_multiplier": 1, "narrow": 1 / 32}


def random_dctnet_constants(seed: int) -> dict[str, np.ndarray]:
    """DCT-Net's 36 weight constants (official names and HWIO shapes), random, small enough to keep colours sane."""
    from deployments.cartoon.dctnet import official_weight_shapes

    rng = np.random.default_rng(seed)
    return {
        name: (rng.standard_normal(shape) * 0.05).astype(np.float32) for name, shape in official_weight_shapes().items()
    }


@pytest.fixture(scope="session")
def serve_model_store(tmp_path_factory, builtin_store) -> tuple[Path, Path]:
    """(store root, manifest) for the Serve session: the built-in models linked in, a tiny generated GPEN standing in
    for ``gpen-bfr-512`` and a random-weight DCT-Net graph (official format) for both ``anime`` models, each pinned
    by its sha256 in a copy of the manifest. ``gpen-bfr-256`` and the other styles stay absent, so those serve the
    classic engines."""
    import torch

    from deployments.common.weights import sha256_of
    from deployments.restore.gpen import GpenConfig, build_gpen

    root = tmp_path_factory.mktemp("serve-models")
    manifest = yaml.safe_load((REPO_ROOT / "configs" / "models.yaml").read_text(encoding="utf-8"))
    store = builtin_store  # links to exactly the downloaded built-ins
    builtins = [spec for spec in manifest["models"].values() if spec.get("builtin") and not spec.get("derive")]
    for folder in sorted({Path(spec["file"]).parts[0] for spec in builtins}):  # not the converted Real-ESRGAN: slow
        (root / folder).symlink_to(store / folder, target_is_directory=True)
    torch.manual_seed(0)
    checkpoint = root / "gpen" / "GPEN-BFR-512.pth"
    checkpoint.parent.mkdir()
    torch.save(build_gpen(GpenConfig(**TINY_GPEN)).state_dict(), checkpoint)
    entry = manifest["models"]["gpen-bfr-512"]
    args = {**entry["args"], **TINY_GPEN}  # the tiny network, the model's own face template
    entry.update(sha256=sha256_of(checkpoint), size_bytes=checkpoint.stat().st_size, args=args)
    graph = dctnet_graph(random_dctnet_constants(seed=0), eps=0.01)
    for model in ("dctnet-anime-head", "dctnet-anime-bg"):
        path = root / manifest["models"][model]["file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(graph)
        manifest["models"][model].update(sha256=sha256_of(path), size_bytes=path.stat().st_size)
    manifest_path = root / "models.yaml"
    manifest_path.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")  # order: preference
    return root, _with_tiny_generative_parts(root, manifest_path)


def _with_tiny_generative_parts(root: Path, manifest_path: Path) -> Path:
    """The renderer's models as tiny random parts under their shipped names, pulled from a folder mirror."""
    pytest.importorskip("diffusers")
    from deployments.common.download import pull
    from deployments.common.weights import ModelStore, load_manifest
    from tests.unit.render.tiny_sdxl import LORAS, SHIPPED_PARTS, as_shipped, build_mirror

    mirror = root.parent / f"{root.name}-mirror"
    mirror.mkdir()
    build_mirror(mirror)
    shipped = as_shipped(mirror, manifest_path)
    parts = [*SHIPPED_PARTS, *LORAS]
    outcomes = pull(ModelStore(str(root), load_manifest(shipped)), parts, mirror=str(mirror))
    assert [outcome.error for outcome in outcomes] == [None] * len(parts)
    return shipped


@pytest.fixture(scope="session")
def serve_app_args() -> dict:
    return {}


# The bucket runner of the session app: ``configs/local.yaml``'s folder route resolves under this root.
SERVE_EVENTS_TOKEN = "serve-test-token"


@pytest.fixture(scope="session")
def serve_events_token() -> str:
    """``PORTRAIT_EVENTS_TOKEN`` of the session app: ``POST /v1/events/s3`` needs ``Authorization: Bearer <it>``."""
    return SERVE_EVENTS_TOKEN


@pytest.fixture(scope="session")
def serve_buckets_root(tmp_path_factory) -> Path:
    """``PORTRAIT_BUCKETS_ROOT`` of the session app: its ``buckets/in`` → ``buckets/out`` route lives here (the
    runner refuses to start when a route's input folder does not exist)."""
    root = tmp_path_factory.mktemp("serve-buckets")
    (root / "buckets" / "in").mkdir(parents=True)
    return root


@pytest.fixture(scope="session")
def serve_url(serve_model_store, serve_app_args, serve_buckets_root) -> str:
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    os.environ.update(RAY_ENV)
    port = _free_port()
    store_root, manifest = serve_model_store
    env_vars = {**RAY_ENV, "PORTRAIT_MODEL_STORE": str(store_root), "PORTRAIT_MODELS_MANIFEST": str(manifest)}
    env_vars |= {"PORTRAIT_BUCKETS_ROOT": str(serve_buckets_root), "PORTRAIT_EVENTS_TOKEN": SERVE_EVENTS_TOKEN}
    env_vars |= {"PORTRAIT_PUBLIC_HEALTH_DETAIL": "true"}  # the tests read every deployment's report
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


def _not_ok(answer: httpx.Response) -> str:
    """The deployments whose report is not ok (what keeps the app from starting), else the answer's start."""
    try:
        deployments = answer.json()["deployments"]
    except (ValueError, KeyError, TypeError):
        return answer.text[:300]
    return str({name: report for name, report in deployments.items() if report.get("status") != "ok"})[:2000]


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{url}/healthz", timeout=10)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {_not_ok(answer)}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1)
    raise RuntimeError(f"the Serve application did not become healthy in {STARTUP_TIMEOUT_S}s: {last}")


@pytest.fixture(scope="session")
def two_faces(astronaut_rgb) -> np.ndarray:
    """Two astronauts side by side on a flat grey band: 1024x600, faces near x=225 and x=737."""
    photo = np.full((600, 1024, 3), 90, np.uint8)
    photo[44:556, :512] = astronaut_rgb
    photo[44:556, 512:] = astronaut_rgb
    return photo


@pytest.fixture(scope="session")
def two_faces_png(two_faces) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(two_faces).save(buffer, format="PNG")
    return buffer.getvalue()
