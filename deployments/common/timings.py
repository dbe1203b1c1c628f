"""The one timer of a piece of work's phases: a request's job (``serve_app/jobs``), an ID photo's render
(``idphoto.pipeline``), a video's chunks (``video.pipeline``); each reports ``Timings.ms`` in its metadata."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Timings:
    """Wall-clock milliseconds per phase (rounded to 0.01 ms); a phase timed twice adds up."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = round(self.ms.get(name, 0.0) + (time.perf_counter() - start) * 1000.0, 2)
