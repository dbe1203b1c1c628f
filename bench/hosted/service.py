"""Start ``configs/local.yaml`` in this process with the bench's args (keys, jobs, two ingress replicas), the way the
Serve tests do (``tests/serve/conftest.py``); one Ray cluster, shut down at the end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.serve.conftest import RAY_ENV, _free_port, _wait_healthy, serve_config


@dataclass
class Service:
    url: str
    client: Any  # Serve's controller client
    port: int
    env: dict[str, str]
    ingress_replicas: int

    def redeploy(self, args: dict[str, Any], timeout_s: float = 900) -> None:
        """The same application with other args (Serve restarts what they change); returns once it runs again."""
        from ray import serve
        from ray.serve.schema import ServeDeploySchema

        try:
            self.client.deploy_apps(ServeDeploySchema.model_validate(_config(self, args)), _blocking=True)
        except TimeoutError:  # Serve waits 60 s; a loaded box takes longer to restart what changed
            deadline = time.monotonic() + timeout_s
            while serve.status().applications["portrait"].status != "RUNNING":
                if time.monotonic() > deadline:
                    raise
                time.sleep(2)
        _wait_until_healthy(self.url)


def _wait_until_healthy(url: str, tries: int = 4) -> None:
    """``_wait_healthy`` of the Serve tests, a few times over: a box shared with other work starts slowly."""
    for attempt in range(1, tries + 1):
        try:
            _wait_healthy(url)
            return
        except RuntimeError:
            if attempt == tries:
                raise


def _config(service: Service, args: dict[str, Any]) -> dict:
    config = serve_config(service.port, service.env, args)
    for deployment in config["applications"][0]["deployments"]:
        if deployment["name"] == "Ingress":
            deployment["num_replicas"] = service.ingress_replicas
    return config


@contextmanager
def running_service(args: dict[str, Any], env_vars: dict[str, str], *, ingress_replicas: int = 2) -> Iterator[Service]:
    """The running service (``/healthz`` answers 200: without a key it says only the verdict)."""
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    os.environ.update(RAY_ENV)
    port = _free_port()
    env = {**RAY_ENV, **env_vars}
    service = Service(f"http://127.0.0.1:{port}", None, port, env, ingress_replicas)
    schema = ServeDeploySchema.model_validate(_config(service, args))
    # 3 logical CPUs: local.yaml's fractional num_cpus add up to 2.15 with a second ingress replica, and a killed
    # replica must find room again (the box has 2 cores; these are scheduling units, not threads).
    ray.init(num_cpus=3, include_dashboard=False, object_store_memory=300 * 1024 * 1024, runtime_env={"env_vars": env})
    try:
        service.client = serve_api.serve_start(http_options=schema.http_options.model_dump(), proxy_location="HeadOnly")
        service.client.deploy_apps(schema, _blocking=False)
        _wait_until_healthy(service.url)
        yield service
    finally:
        ray.shutdown()
