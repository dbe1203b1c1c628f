"""One writer at a time in a folder, across processes and replicas sharing it: an ``flock`` on the folder itself."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the folder of ``path`` (created if absent): one writer of files there at a
    time, across processes and replicas sharing the folder, and no lock file left behind. The kernel drops the lock
    if the holder dies. Not re-entrant: never nest two of these."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock
