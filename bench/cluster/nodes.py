"""A head and a worker raylet on this machine, on ports of their own, and stopping exactly what they started."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0"}
VICTIM_LABEL = {"portrait-fault": "victim"}
SURVIVOR_LABEL = {"portrait-fault": "survivor"}


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
