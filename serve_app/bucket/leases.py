"""Claims on single objects in the output store, so two processes never run the same object at once.

In one process ``pending.KeyLocks`` does this; across processes (a runner and ``portrait process`` over the same
input, two runners after a failover) the claim is a small record, ``_errors/_errors/<sha256 of the key>.lease``
(``storage.keys.lease_name``): who holds it and until when. A worker that finds a live claim of another holder
leaves the object (``in_progress``): the holder writes its record, and if it died, its claim expires after
``ttl_s`` and the next scan takes the object. Every bucket runner claims as ``RUNNER_HOLDER`` (there is one runner
replica; in it, ``KeyLocks`` order the work), so a runner restarted after a crash takes over its own claims at once;
each ``portrait process`` run claims under a name of its own. S3 has no compare-and-swap everywhere (SeaweedFS,
older MinIO), so a claim is written, then read back: two workers can both win only if their reads and writes
interleave within the same few milliseconds.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from serve_app.bucket.records import RECORD_CONTENT_TYPE, dump_record, read_record
from storage.base import ObjectStore

logger = logging.getLogger(__name__)


RUNNER_HOLDER = "bucket-runner"


class Lease(BaseModel):
    holder: str
    expires_at: datetime


def new_holder() -> str:
    """``host/pid/random``: tells a log reader which process holds a claim, unique per worker."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


class Leases:
    """Claims of one holder, each valid for ``ttl_s`` (longer than a job may take)."""

    def __init__(self, ttl_s: float, holder: str) -> None:
        self.holder = holder
        self._ttl = timedelta(seconds=ttl_s)

    def claim(self, store: ObjectStore, name: str) -> bool:
        """Whether this holder may process the object now (it then holds the claim until ``release``)."""
        now = datetime.now(UTC)
        current = read_record(store, name, Lease)
        if current is not None and current.holder != self.holder and current.expires_at > now:
            logger.info("%s: %r is claimed by %s until %s", store, name, current.holder, current.expires_at)
            return False
        mine = Lease(holder=self.holder, expires_at=now + self._ttl)
        store.put(name, dump_record(mine), content_type=RECORD_CONTENT_TYPE)
        confirmed = read_record(store, name, Lease)
        return confirmed is not None and confirmed.holder == self.holder

    def release(self, store: ObjectStore, name: str) -> None:
        """Drop the claim; a failure only delays others until it expires, so it is logged, not raised."""
        try:
            store.delete(name)
        except Exception:
            logger.warning("%s: claim %r not released; it expires by itself", store, name, exc_info=True)
