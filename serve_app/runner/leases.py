"""Claims on single objects in the output store, so two processes never run the same object at once.

In one process ``pending.KeyLocks`` does this; across processes (a runner and ``portrait process`` over the same
input, two runners after a failover) the claim is a small record, ``_errors/_errors/<sha256 of the key>.lease``
(``storage.keys.lease_name``): who holds it and until when. A worker that finds a live claim of another holder
leaves the object (``in_progress``): the holder writes its record, and if it died, its claim expires after
``ttl_s`` and the next scan takes the object. Every bucket runner claims as ``RUNNER_HOLDER`` (there is one runner
replica; in it, ``KeyLocks`` order the work), so a runner restarted after a crash takes over its own claims at once;
each ``portrait process`` run claims under a name of its own.

The store decides who wins, by conditional writes: a free object is claimed by a create-if-absent
(``If-None-Match: *``), an expired claim (or the holder's own) is rewritten only if its ETag is still the one read
(``If-Match``); of racing workers exactly one write lands, the others get ``PreconditionFailed`` and leave the
object (``in_progress``). A store that ignores these conditions is refused at start-up (``require_conditional_writes``),
as the jobs API refuses it for idempotency keys: there every claim would be a blind overwrite, and the old fallback
(write, then read back) still lets two workers both win when their requests interleave, running an object twice. AWS
S3, recent MinIO, SeaweedFS, R2 and folders enforce them. The store has no conditional delete, so a release checks the
ETag, then deletes: the two can interleave only with a takeover of a claim that already expired (a job that overran
``ttl_s``, which the job timeout prevents).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from deployments.common.errors import InvalidParameter
from serve_app.runner.records import RECORD_CONTENT_TYPE, dump_record, read_record_at
from storage.base import ObjectStore, enforces_conditional_writes
from storage.errors import ObjectNotFound, PreconditionFailed
from storage.keys import ERRORS_FOLDER

logger = logging.getLogger(__name__)


RUNNER_HOLDER = "bucket-runner"


class Lease(BaseModel):
    holder: str
    expires_at: datetime


def new_holder() -> str:
    """``host/pid/random``: tells a log reader which process holds a claim, unique per worker."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"


def require_conditional_writes(store: ObjectStore, route: str) -> None:
    """``InvalidParameter`` when the route's output store ignores conditional writes, which claims rest on."""
    if enforces_conditional_writes(store, f"{ERRORS_FOLDER}/{ERRORS_FOLDER}/{uuid.uuid4().hex}.probe"):
        return
    raise InvalidParameter(
        f"route {route!r}: the output store {store} ignores conditional writes (If-None-Match: *), so two workers "
        "could claim one object: use a store that enforces them (AWS S3, recent MinIO, SeaweedFS, R2, a folder)",
        details={"route": route, "store": str(store)},
    )


class Leases:
    """Claims of one holder, each valid for ``ttl_s`` (longer than a job may take)."""

    def __init__(self, ttl_s: float, holder: str) -> None:
        self.holder = holder
        self._ttl = timedelta(seconds=ttl_s)

    def claim(self, store: ObjectStore, name: str) -> str | None:
        """The ETag of this holder's claim when it may process the object now (until ``release``); ``None`` when
        another holder has a live claim or won the race for it."""
        now = datetime.now(UTC)
        mine = dump_record(Lease(holder=self.holder, expires_at=now + self._ttl))
        found = read_record_at(store, name, Lease)
        try:
            if found is None:
                return store.put(name, mine, content_type=RECORD_CONTENT_TYPE, if_absent=True).etag
            current, etag = found
            if current is not None and current.holder != self.holder and current.expires_at > now:
                logger.info("%s: %r is claimed by %s until %s", store, name, current.holder, current.expires_at)
                return None
            return store.put(name, mine, content_type=RECORD_CONTENT_TYPE, if_match=etag).etag
        except PreconditionFailed:
            logger.info("%s: %r was claimed by another worker first", store, name)
            return None

    def release(self, store: ObjectStore, name: str, etag: str) -> None:
        """Drop the claim written as ``etag``, unless another worker took it over after it expired. A failure only
        delays others until the claim expires, so it is logged, not raised."""
        try:
            if store.head(name).etag != etag:
                logger.warning("%s: claim %r was taken over after it expired; left to its new holder", store, name)
                return
            store.delete(name)
        except ObjectNotFound:
            logger.warning("%s: claim %r was already gone", store, name)
        except Exception:
            logger.warning("%s: claim %r not released; it expires by itself", store, name, exc_info=True)
