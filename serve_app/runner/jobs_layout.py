"""Where a job's pieces live in the jobs store, and what a job id says.

    in/<task>/<owner>/<id>                  the input: the route ``jobs-<task>`` of the bucket runner reads it
    out/<task>/<owner>/<id>.<ext>, .json    result and ``ResultRecord`` (written by the bucket runner, exactly once)
    out/<task>/_errors/<owner>/<id>.json    ``ErrorRecord`` when the job failed
    jobs/<owner>/<id>.json                  ``JobRecord``: task, options, callback, times (written at submit)
    jobs/<owner>/<id>.state.json            ``JobState``: cancelled or running, progress, callback deliveries
    idem/<owner>/<sha256 of the key>.json   ``IdempotencyClaim``: the job an idempotency key names (a conditional
                                            write creates it, so racing submits make one job)

``owner`` is the API key's id (``anonymous`` without keys): a key sees only its own jobs. A job id is
``<expiry, unix seconds in hex>-<24 random hex>``: an id past its expiry answers 410 ``gone`` whether or not the
sweep has deleted its objects yet, and unknown ids stay 404 (so does an id whose expiry no date can hold).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

ROUTE_PREFIX = "jobs-"
_JOB_ID = re.compile(r"[0-9a-f]{8,12}-[0-9a-f]{24}")


@dataclass(frozen=True)
class JobRef:
    owner: str
    id: str

    @property
    def key(self) -> str:
        """The input's key within its task's route (and the stem of its results)."""
        return f"{self.owner}/{self.id}"

    @property
    def record_key(self) -> str:
        return f"jobs/{self.owner}/{self.id}.json"

    @property
    def state_key(self) -> str:
        return f"jobs/{self.owner}/{self.id}.state.json"


def new_job_id(expires_at: datetime) -> str:
    return f"{int(expires_at.timestamp()):x}-{secrets.token_hex(12)}"


def is_job_id(text: str) -> bool:
    """The shape of a job id, with an expiry a date can hold (``ffffffffff-...`` is past year 9999: no job's)."""
    if _JOB_ID.fullmatch(text) is None:
        return False
    try:
        expiry_of(text)
    except (ValueError, OverflowError, OSError):
        return False
    return True


def expiry_of(job_id: str) -> datetime:
    return datetime.fromtimestamp(int(job_id.split("-", 1)[0], 16), UTC)


def route_name(task: str) -> str:
    return ROUTE_PREFIX + task


def job_of_route(route: str, key: str) -> tuple[str, JobRef] | None:
    """(task, job) for an object of a jobs route; None for a bucket route's object or a foreign key."""
    if not route.startswith(ROUTE_PREFIX):
        return None
    owner, _, job_id = key.partition("/")
    if not owner or not is_job_id(job_id):
        return None
    return route[len(ROUTE_PREFIX) :], JobRef(owner, job_id)


def idempotency_key(owner: str, digest: str) -> str:
    return f"idem/{owner}/{digest}.json"
