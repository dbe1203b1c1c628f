"""Start ``configs/local.yaml`` in this process with the bench's args (keys, jobs, two ingress replicas), the way the
Serve tests do (``tests/serve/conftest.py``); one Ray cluster, shut down at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.serve.conftest import RAY_ENV, _free_port, _wait_healthy, serve_config


@contextmanager
def running_service(args: dict[str, Any], env_vars: dict[str, str], *, ingress_replicas: int = 2) -> Iterator[str]:
    """The service's URL while it runs (``/healthz`` answers 200: without a key it says only the verdict)."""
    import ray
    from ray.serve._private import api as serve_api
    from ray.serve.schema import ServeDeploySchema

    os.environ.update(RAY_ENV)
    port = _free_port()
    env = {**RAY_ENV, **env_vars}
    config = serve_config(port, env, args)
    for deployment in config["applications"][0]["deployments"]:
        if deployment["name"] == "Ingress":
            deployment["num_replicas"] = ingress_replicas
    schema = ServeDeploySchema.model_validate(config)
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=300 * 1024 * 1024, runtime_env={"env_vars": env})
    try:
        client = serve_api.serve_start(http_options=schema.http_options.model_dump(), proxy_location="HeadOnly")
        client.deploy_apps(schema, _blocking=False)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url)
        yield url
    finally:
        ray.shutdown()
