"""Whose jobs a caller reaches (docs/operations.md "Keys and quotas"): the jobs API as the ingress starts it.

With keys each key is a tenant: its id is the owner in every path of its jobs (``jobs_layout``), so it sees its own
jobs only. Without keys every caller is the one owner ``anonymous``: right on loopback (the machine's own user),
wrong on a network, where anyone who reaches the port would list, download and delete everyone's jobs. So beyond
loopback without keys the jobs API does not start, unless ``args.jobs.open_beyond_loopback`` says the network is
trusted; then a job's id (96 random bits) is its only handle: whoever holds it may read, download and delete the
job, ``GET /v1/jobs`` (which would hand out every caller's ids) is 403, and a reused idempotency key does not name
the job that holds it.
"""

from __future__ import annotations

import logging

from serve_app.auth.guard import is_loopback
from serve_app.auth.keys import KeyRing
from serve_app.jobs_api.service import JobQueue, JobsService
from serve_app.runner.jobs_config import JobsConfig
from serve_app.runner.jobs_store import JobStore

logger = logging.getLogger(__name__)


class JobsOpenToAll(RuntimeError):
    """The jobs API would make every caller beyond loopback one tenant: the ingress does not start."""


def jobs_service(config: JobsConfig, store: JobStore, queue: JobQueue, *, keys: KeyRing, http_host: str) -> JobsService:
    """The jobs API for an ingress listening on ``http_host``; ``JobsOpenToAll`` when it would be everyone's."""
    shared = not len(keys) and not is_loopback(http_host)
    if shared and not config.open_beyond_loopback:
        raise JobsOpenToAll(
            f"the HTTP host is {http_host} and no API keys are configured, so every caller of /v1/jobs would list, "
            "download and delete every other's jobs: configure keys (args.auth, docs/operations.md \"Keys and "
            'quotas"), listen on 127.0.0.1, or on a trusted network set args.jobs.open_beyond_loopback: true (a '
            "job's id is then its only handle, and GET /v1/jobs is refused)"
        )
    if shared:
        logger.warning(
            "the jobs API is open beyond loopback without keys (args.jobs.open_beyond_loopback, HTTP host %s): "
            "whoever holds a job's id may read, download and delete it; GET /v1/jobs is refused",
            http_host,
        )
    return JobsService(config, store, queue, ids_are_capabilities=shared)
