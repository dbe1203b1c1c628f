"""Start ``configs/local.yaml`` in this process with the bench's args (keys, jobs, two ingress replicas), the way
``serve run`` does; one Ray cluster, shut down at the end."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0", "RAY_AUTH_MODE": "disabled"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bench_config(port: int, args: dict[str, Any], env_vars: dict[str, str], ingress_replicas: int) -> dict:
    config = yaml.safe_load((REPO_ROOT / "configs" / "local.yaml").read_text(encoding="utf-8"))
    config["http_options"] = {**config.get("http_options", {}), "host": "127.0.0.1", "port": port}
    app = config["applications"][0]
    app["args"] = {**(app.get("args") or {}), **args}
    app["runtime_env"] = {"env_vars": env_vars}
    for deployment in app["deployments"]:
        if deployment["name"] == "Ingress":
            deployment["num_replicas"] = ingress_replicas
    return config


@contextmanager
def running_service(
    args: dict[str, Any],
    env_vars: dict[str, str],
    *,
    probe_key: str = "",
    ingress_replicas: int = 2,
    startup_s: float = 300,
) -> Iterator[str]:
    """The service's URL while it runs (every deployment healthy)."""
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    os.environ.update(RAY_ENV)
    port = free_port()
    env = {**RAY_ENV, **env_vars}
    config = ServeDeploySchema.model_validate(bench_config(port, args, env, ingress_replicas))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=300 * 1024 * 1024, runtime_env={"env_vars": env})
    try:
        client = serve_api.serve_start(http_options=config.http_options.model_dump(), proxy_location="HeadOnly")
        client.deploy_apps(config, _blocking=False)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, probe_key, startup_s)
        yield url
    finally:
        ray.shutdown()


def _wait_healthy(url: str, key: str, startup_s: float) -> None:
    deadline = time.monotonic() + startup_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(f"{url}/healthz", headers={"Authorization": f"Bearer {key}"}, timeout=10)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1)
    raise RuntimeError(f"the service did not become healthy in {startup_s:.0f} s: {last}")
