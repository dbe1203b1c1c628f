"""``configs/cluster-cpu.yaml`` as the fault test deploys it, and waiting until it runs spread over both nodes."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import httpx
import yaml

from bench.cluster.nodes import BIN, RAY_ENV, SURVIVOR_LABEL, VICTIM_LABEL

REPO_ROOT = Path(__file__).resolve().parents[2]


def fault_config(buckets_root: Path, http_port: int, poll_interval_s: float) -> dict:
    """``configs/cluster-cpu.yaml`` as deployed here: this repo as a ``local://`` working dir, the test's port, one
    folder route under an absolute root, the BucketRunner on the victim first (the head when the victim is gone)."""
    config = yaml.safe_load((REPO_ROOT / "configs" / "cluster-cpu.yaml").read_text(encoding="utf-8"))
    config["http_options"] = {**config["http_options"], "host": "127.0.0.1", "port": http_port}
    [app] = config["applications"]
    env = (app.get("runtime_env") or {}).get("env_vars", {})
    env |= {
        **RAY_ENV,
        "PORTRAIT_BUCKETS_ROOT": str(buckets_root),
        "PORTRAIT_MODEL_STORE": os.environ.get("PORTRAIT_MODEL_STORE", str(REPO_ROOT / "models")),
    }
    app["runtime_env"] = {"working_dir": f"local://{REPO_ROOT}", "env_vars": env}
    [runner] = [d for d in app["deployments"] if d["name"] == "BucketRunner"]
    runner["ray_actor_options"] |= {
        "label_selector": VICTIM_LABEL,
        "fallback_strategy": [{"label_selector": SURVIVOR_LABEL}],
    }
    runner["user_config"] |= {
        "poll_interval_s": poll_interval_s,
        "routes": [{"name": "restore-folder", "input": "buckets/in", "output": "buckets/out", "task": "restore"}],
    }
    return config


def serve_deploy(config_path: Path, dashboard: str) -> None:
    env = {**os.environ, **RAY_ENV}
    command = [str(BIN / "serve"), "deploy", str(config_path), "--address", dashboard]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"serve deploy failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")


def serve_details(dashboard: str) -> dict:
    answer = httpx.get(f"{dashboard}/api/serve/applications/", timeout=10)
    answer.raise_for_status()
    return answer.json()


def replica_nodes(details: dict) -> dict[str, list[str]]:
    """Node id of every RUNNING replica, per deployment."""
    deployments = details.get("applications", {}).get("portrait", {}).get("deployments", {})
    return {
        name: sorted(r["node_id"] for r in d.get("replicas", []) if r.get("state") == "RUNNING")
        for name, d in deployments.items()
    }


def wait_until_spread(dashboard: str, url: str, node_ids: set[str], timeout_s: float) -> dict[str, list[str]]:
    """Every deployment RUNNING, the two-replica ones on both nodes, ``/healthz`` 200."""
    deadline, last = time.monotonic() + timeout_s, "no answer"
    while time.monotonic() < deadline:
        try:
            details = serve_details(dashboard)
            app = details.get("applications", {}).get("portrait", {})
            nodes = replica_nodes(details)
            spread = all(set(ids) == node_ids for name, ids in nodes.items() if name != "BucketRunner")
            last = f"app {app.get('status')}: {app.get('message', '')[:400]}; replicas {nodes}"
            if app.get("status") == "RUNNING" and spread and nodes.get("BucketRunner"):
                if httpx.get(f"{url}/healthz", timeout=10).status_code == 200:
                    return nodes
        except (httpx.HTTPError, ValueError) as exc:
            last = repr(exc)
        time.sleep(3)
    raise RuntimeError(f"the application did not come up spread over both nodes in {timeout_s:.0f} s: {last}")
