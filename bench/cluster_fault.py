"""Lose a node under load: a two-node Ray cluster on this machine, ``configs/cluster-cpu.yaml`` deployed on it, the
worker node's raylet killed while clients send jobs and photos land in a bucket folder.

What it does, bounded in time and on 127.0.0.1 only:

1. starts a head and a worker raylet (``ray start``, each with its own ``--num-cpus``, temp dir and ports; the worker
   labelled ``portrait-fault=victim``) and deploys ``configs/cluster-cpu.yaml`` with
   ``serve deploy --address http://127.0.0.1:<dashboard>`` and ``working_dir: local://<this repo>``, adding one folder
   route (``buckets/in`` → ``buckets/out`` under an absolute ``PORTRAIT_BUCKETS_ROOT``) and placing the BucketRunner on
   the victim first (a label selector with the head as fallback), so the kill makes it move;
2. runs ``--clients`` clients in a loop (faces, restore, idphoto, cartoon; each request retried on 5xx, 408 and
   dropped connections, honouring ``Retry-After``) and drops ``--photos`` photos into the route's folder, one every
   ``--upload-every-s``; polls ``/healthz`` every second;
3. after ``--before-s`` SIGKILLs the worker's raylet (its replicas, proxy and the BucketRunner die with it) and keeps
   going for ``--after-s``; then waits until every photo has a record.

Reports requests ok / sent after client retries, the longest gap without a success, photos lost (no record) and
duplicated (a record written twice, or a result and an error record), where the BucketRunner ran before and after,
and the slowest ``/healthz``. Targets (issue 16): >= 99 % ok, no gap over 30 s, nothing lost or duplicated.
It stops its own Ray processes (by process group and by temp dir, never ``ray stop``, which would stop every Ray on
the machine) and removes its temp dir, also on failure or Ctrl-C.

    python -m bench.cluster_fault --clients 4 --before-s 30 --after-s 60 --photos 30
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import yaml
from PIL import Image

from bench.load_test import JOB_ROUTES

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0"}
VICTIM_LABEL = {"portrait-fault": "victim"}
SURVIVOR_LABEL = {"portrait-fault": "survivor"}
RETRYABLE = (408, 429, 500, 502, 503, 504)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_range(count: int) -> int:
    """The first of ``count`` ports, none listening now (outside Ray's default worker ports, 10002-19999)."""
    rng = random.Random()
    for _ in range(100):
        base = rng.randrange(20000, 30000 - count)
        if all(_port_free(port) for port in range(base, base + count, 10)):
            return base
    raise RuntimeError("no free port range")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def small_portrait(side_px: int, seed: int) -> bytes:
    """The astronaut at ``side_px``, with a few random pixels so every upload has its own ETag."""
    from skimage import data

    rgb = np.array(Image.fromarray(data.astronaut()).resize((side_px, side_px)))  # a writable copy
    rng = np.random.default_rng(seed)
    rgb[rng.integers(0, side_px, 8), rng.integers(0, side_px, 8)] = rng.integers(0, 255, (8, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="JPEG", quality=88)
    return buffer.getvalue()


# The cluster ----------------------------------------------------------------------------------------------------


@dataclass
class Node:
    name: str
    temp_dir: Path
    node_manager_port: int
    process: subprocess.Popen | None = None


class TwoNodeCluster:
    """A head and a worker raylet on this machine; ``close`` stops exactly the processes it started."""

    def __init__(self, root: Path, head_cpus: int, worker_cpus: int) -> None:
        self.gcs_port, self.dashboard_port = free_port(), free_port()
        self.head = Node("head", root / "h", free_port())
        self.worker = Node("worker", root / "w", free_port())
        self._cpus = {"head": head_cpus, "worker": worker_cpus}
        self._log = open(root / "ray-start.log", "ab")  # noqa: SIM115 - closed in close()

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def start(self) -> None:
        self._start(self.head, ["--head", f"--port={self.gcs_port}", "--dashboard-host=127.0.0.1"], SURVIVOR_LABEL)
        self._start(self.worker, [f"--address=127.0.0.1:{self.gcs_port}"], VICTIM_LABEL)

    def _start(self, node: Node, role: list[str], labels: dict[str, str]) -> None:
        node.temp_dir.mkdir(parents=True)
        worker_ports = port_range(200)
        command = [
            str(BIN / "ray"),
            "start",
            "--block",
            *role,
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self._cpus[node.name]}",
            "--num-gpus=0",
            f"--temp-dir={node.temp_dir}",
            f"--node-manager-port={node.node_manager_port}",
            f"--object-manager-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--min-worker-port={worker_ports}",
            f"--max-worker-port={worker_ports + 199}",
            "--object-store-memory=100000000",
            "--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()),
            "--disable-usage-stats",
        ]
        if node is self.head:
            command += [f"--dashboard-port={self.dashboard_port}", f"--ray-client-server-port={free_port()}"]
        env = {**os.environ, **RAY_ENV}
        node.process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def alive_nodes(self) -> list[dict]:
        answer = httpx.get(f"{self.dashboard}/api/v0/nodes", params={"limit": 100}, timeout=10)
        answer.raise_for_status()
        return [n for n in answer.json()["data"]["result"]["result"] if n["state"] == "ALIVE"]

    def wait_for_nodes(self, count: int, timeout_s: float) -> list[dict]:
        deadline, last = time.monotonic() + timeout_s, "no answer"
        while time.monotonic() < deadline:
            for node in (self.head, self.worker):
                if node.process is not None and node.process.poll() is not None:
                    raise RuntimeError(
                        f"ray start ({node.name}) exited {node.process.returncode}: see {self._log.name}"
                    )
            try:
                nodes = self.alive_nodes()
                if len(nodes) >= count:
                    return nodes
                last = f"{len(nodes)} nodes alive"
            except (httpx.HTTPError, KeyError, ValueError) as exc:
                last = repr(exc)
            time.sleep(2)
        raise RuntimeError(f"the cluster did not reach {count} nodes in {timeout_s:.0f} s: {last}")

    def kill_worker_raylet(self) -> int:
        """SIGKILL the worker's raylet (found by its node-manager port); its pid."""
        flag = f"--node_manager_port={self.worker.node_manager_port}"
        for pid, cmdline in _processes():
            if "raylet" in cmdline[0] and flag in cmdline:
                os.kill(pid, signal.SIGKILL)
                return pid
        raise RuntimeError(f"no raylet with {flag}")

    def close(self) -> None:
        """Stop every process this cluster started: the ``ray start`` process groups, then anything left that names
        one of its temp dirs (workers, agents)."""
        for node in (self.head, self.worker):
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            p.process and p.process.poll() is None for p in (self.head, self.worker)
        ):
            time.sleep(0.2)
        for node in (self.head, self.worker):
            if node.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(node.process.pid, signal.SIGKILL)
        mine = (str(self.head.temp_dir), str(self.worker.temp_dir))
        for pid, cmdline in _processes():
            if pid != os.getpid() and any(d in arg for arg in cmdline for d in mine):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self._log.close()


def _processes() -> list[tuple[int, list[str]]]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                found.append((int(entry.name), [part.decode(errors="replace") for part in cmdline if part]))
    return [(pid, cmd) for pid, cmd in found if cmd]


# The deployment -------------------------------------------------------------------------------------------------


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


# The load -------------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    sent: int = 0
    ok: int = 0
    attempts: int = 0
    failures: dict[str, int] = field(default_factory=dict)  # after every retry, by job and last answer
    retried: dict[str, int] = field(default_factory=dict)  # answers that made a client retry
    successes_at: list[float] = field(default_factory=list)
    health: list[tuple[float, str, float, dict]] = field(default_factory=list)  # (time, "code status", s, body)


async def one_job(client: httpx.AsyncClient, job: str, photo: bytes, retries: int, tally: Tally) -> None:
    route, fields = JOB_ROUTES[job]
    tally.sent += 1
    outcome = "?"
    for attempt in range(retries + 1):
        tally.attempts += 1
        wait_s = min(4.0, 0.25 * 2**attempt)
        try:
            answer = await client.post(route, files={"image": ("p.jpg", photo, "image/jpeg")}, data=fields)
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        else:
            if answer.status_code == 200:
                tally.ok += 1
                tally.successes_at.append(time.monotonic())
                return
            outcome = f"{answer.status_code} {_error_code(answer)}".strip()
            if answer.status_code not in RETRYABLE:
                break
            wait_s = min(wait_s, float(answer.headers.get("retry-after", wait_s)))
        if attempt < retries:
            tally.retried[outcome] = tally.retried.get(outcome, 0) + 1
            await asyncio.sleep(wait_s)
    tally.failures[f"{job}:{outcome}"] = tally.failures.get(f"{job}:{outcome}", 0) + 1


def _error_code(answer: httpx.Response) -> str:
    """Our JSON error code (``unavailable``, ``timeout``...), or nothing when Serve's proxy answered in plain text."""
    with contextlib.suppress(ValueError, AttributeError, KeyError, TypeError):
        return str(answer.json()["error"]["code"])
    return ""


async def clients(url: str, count: int, until: float, retries: int, tally: Tally) -> None:
    photo = small_portrait(256, seed=0)
    jobs = list(JOB_ROUTES)

    async def loop(index: int) -> None:
        rng = random.Random(index)
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(60.0)) as client:
            while time.monotonic() < until:
                await one_job(client, rng.choice(jobs), photo, retries, tally)

    await asyncio.gather(*(loop(index) for index in range(count)))


async def health_poller(url: str, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(30.0)) as client:
        while time.monotonic() < until:
            start = time.monotonic()
            try:
                answer = await client.get("/healthz")
                body = answer.json()
                seen = f"{answer.status_code} {body.get('status')}"
            except (httpx.HTTPError, ValueError) as exc:
                body, seen = {}, type(exc).__name__
            tally.health.append((start, seen, time.monotonic() - start, body))
            await asyncio.sleep(1.0)


async def uploader(inbox: Path, photos: int, every_s: float) -> list[str]:
    keys = []
    for index in range(photos):
        key = f"photo-{index:03d}.jpg"
        data = small_portrait(192 + 16 * (index % 4), seed=1000 + index)
        partial = inbox / f".{key}.part"  # written whole, then renamed: the poller never sees half a photo
        partial.write_bytes(data)
        partial.rename(inbox / key)
        keys.append(key)
        await asyncio.sleep(every_s)
    return keys


def record_writes(outbox: Path, seen: dict[str, set[str]]) -> None:
    """Each record's ``finished_at`` as seen now; a record rewritten later shows a second value (a duplicate)."""
    for path in list(outbox.glob("*.json")) + list((outbox / "_errors").glob("*.json")):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            written = record.get("finished_at") or record.get("failed_at")
            key = str(path.relative_to(outbox))
            seen.setdefault(key, set()).add(str(written))


async def record_watcher(outbox: Path, until_done: asyncio.Event, seen: dict[str, set[str]]) -> None:
    while not until_done.is_set():
        record_writes(outbox, seen)
        await asyncio.sleep(0.5)
    record_writes(outbox, seen)


def longest_gap_s(successes_at: list[float], start: float, end: float) -> float:
    points = [start, *sorted(successes_at), end]
    return max(later - earlier for earlier, later in zip(points, points[1:]))


# The run --------------------------------------------------------------------------------------------------------


async def exercise(cluster: TwoNodeCluster, url: str, buckets: Path, args: argparse.Namespace) -> dict:
    inbox, outbox = buckets / "in", buckets / "out"
    tally, seen, done = Tally(), {}, asyncio.Event()
    start = time.monotonic()
    until = start + args.before_s + args.after_s
    load = asyncio.ensure_future(clients(url, args.clients, until, args.retries, tally))
    health = asyncio.ensure_future(health_poller(url, until, tally))
    watcher = asyncio.ensure_future(record_watcher(outbox, done, seen))
    uploads = asyncio.ensure_future(uploader(inbox, args.photos, args.upload_every_s))
    await asyncio.sleep(args.before_s)
    before = replica_nodes(serve_details(cluster.dashboard))
    killed_at, killed_wall = time.monotonic(), datetime.now(UTC)
    pid = cluster.kill_worker_raylet()
    print(f"t={killed_at - start:.1f}s: killed the worker raylet (pid {pid})", flush=True)
    await load
    await health
    keys = await uploads
    after = replica_nodes(serve_details(cluster.dashboard))
    deadline = time.monotonic() + args.drain_s
    while time.monotonic() < deadline and not all(_record_of(k, outbox) for k in keys):
        await asyncio.sleep(1.0)
    await asyncio.sleep(2 * args.poll_interval_s)  # one more scan: a duplicate would be written now
    done.set()
    await watcher
    lost = [k for k in keys if not _record_of(k, outbox)]
    duplicated = [
        k
        for k in keys
        if len(seen.get(f"{Path(k).stem}.json", set())) > 1
        or len(seen.get(f"_errors/{k}.json", set())) > 1
        or (f"{Path(k).stem}.json" in seen and f"_errors/{k}.json" in seen)
    ]
    finished = [_finished_at(outbox / f"{Path(k).stem}.json") for k in keys]
    after_kill = sorted(t for t in finished if t is not None and t > killed_wall)
    health_seen: dict[str, int] = {}
    for _, seen_as, _, _ in tally.health:
        health_seen[seen_as] = health_seen.get(seen_as, 0) + 1
    later = [(t, seen_as, body) for t, seen_as, _, body in tally.health if t >= killed_at + args.healthz_probe_after_s]
    return {
        "requests_sent": tally.sent,
        "requests_ok": tally.ok,
        "attempts": tally.attempts,
        "failures": tally.failures,
        "retried": tally.retried,
        "ok_pct": round(100 * tally.ok / max(tally.sent, 1), 2),
        "longest_gap_s": round(longest_gap_s(tally.successes_at, start, until), 2),
        "longest_gap_after_kill_s": round(
            longest_gap_s([t for t in tally.successes_at if t > killed_at], killed_at, until), 2
        ),
        "uploads": len(keys),
        "results": sum(1 for k in keys if (outbox / f"{Path(k).stem}.json").exists()),
        "error_records": sum(1 for k in keys if (outbox / "_errors" / f"{k}.json").exists()),
        "lost": lost,
        "duplicated": duplicated,
        "bucket_runner_before": before.get("BucketRunner"),
        "bucket_runner_after": after.get("BucketRunner"),
        "results_before_kill": sum(1 for t in finished if t is not None and t <= killed_wall),
        "results_after_kill": len(after_kill),
        "bucket_first_result_after_kill_s": round((after_kill[0] - killed_wall).total_seconds(), 1)
        if after_kill
        else None,
        "healthz_answers": health_seen,
        "healthz_max_s": round(max((s for _, _, s, _ in tally.health), default=float("nan")), 2),
        f"healthz_{args.healthz_probe_after_s:g}s_after_kill": _health_summary(later[0]) if later else None,
        "healthz_at_the_end": _health_summary(later[-1]) if later else None,
    }


def _health_summary(sample: tuple[float, str, dict]) -> dict:
    """What ``/healthz`` said: its answer and every deployment that gave a reason."""
    _, seen_as, body = sample
    deployments = body.get("deployments", {})
    return {"answer": seen_as} | {
        n: f"{r.get('status')}: {r['reason']}" for n, r in deployments.items() if r.get("reason")
    }


def _finished_at(record: Path) -> datetime | None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return datetime.fromisoformat(json.loads(record.read_text(encoding="utf-8"))["finished_at"])
    return None


def _record_of(key: str, outbox: Path) -> bool:
    return (outbox / f"{Path(key).stem}.json").exists() or (outbox / "_errors" / f"{key}.json").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--retries", type=int, default=6, help="client retries per request (5xx, 408, connection)")
    parser.add_argument("--before-s", type=float, default=30.0, help="load before the kill")
    parser.add_argument("--after-s", type=float, default=60.0, help="load after the kill")
    parser.add_argument("--photos", type=int, default=30)
    parser.add_argument("--upload-every-s", type=float, default=2.0)
    parser.add_argument("--poll-interval-s", type=float, default=2.0)
    parser.add_argument("--healthz-probe-after-s", type=float, default=10.0, help="show /healthz this long after")
    parser.add_argument("--drain-s", type=float, default=180.0, help="wait this long for the last records")
    parser.add_argument("--node-cpus", type=int, default=1, help="--num-cpus of each node")
    parser.add_argument("--startup-timeout-s", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="pf-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    cluster = TwoNodeCluster(root, args.node_cpus, args.node_cpus)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cluster.start()
        nodes = cluster.wait_for_nodes(2, timeout_s=120)
        print(
            f"cluster up: {[(n['node_id'][:8], n.get('labels', {}).get('portrait-fault')) for n in nodes]}", flush=True
        )
        buckets = root / "buckets"
        (buckets / "in").mkdir(parents=True)
        http_port = free_port()
        config_path = root / "cluster-cpu.yaml"
        config = fault_config(root, http_port, args.poll_interval_s)  # the route's folders: <root>/buckets/{in,out}
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        started = time.monotonic()
        serve_deploy(config_path, cluster.dashboard)
        url = f"http://127.0.0.1:{http_port}"
        placed = wait_until_spread(cluster.dashboard, url, {n["node_id"] for n in nodes}, args.startup_timeout_s)
        print(f"deployed in {time.monotonic() - started:.0f} s; BucketRunner on {placed['BucketRunner']}", flush=True)
        victim = [n["node_id"] for n in nodes if n.get("labels", {}).get("portrait-fault") == "victim"]
        report = asyncio.run(exercise(cluster, url, buckets, args))
        report["victim_node"] = victim
        print(json.dumps(report, indent=2))
        ok = (
            report["ok_pct"] >= 99 and report["longest_gap_s"] <= 30 and not report["lost"] and not report["duplicated"]
        )
        print("targets (>= 99 % ok, gap <= 30 s, 0 lost, 0 duplicated):", "met" if ok else "NOT met")
        if not ok:
            sys.exit(1)
    finally:
        cluster.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
