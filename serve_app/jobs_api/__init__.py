"""The asynchronous jobs' HTTP side (docs/buckets-and-jobs.md "Asynchronous jobs"): submit, poll or be called back,
download results.

- ``routes``: ``/v1/jobs`` (FastAPI, no Ray);
- ``submission``: reading ``POST /v1/jobs`` (multipart or JSON);
- ``service``: accept a job (stored, then queued), find it, list, cancel;
- ``tenancy``: the service as the ingress starts it (none beyond loopback without keys, unless allowed);
- ``download``: a stored result streamed as the response body.

The jobs run in the runner (``serve_app.runner``: the jobs store, its layout and records, the jobs' routes, endings
and callbacks); this package depends on it, never the other way. The Serve wiring lives in ``serve_app.ingress`` and
``serve_app.runner.deployment``.
"""

from serve_app.jobs_api.service import JobQueue, JobsService, LocalJobQueue
from serve_app.jobs_api.tenancy import JobsOpenToAll, jobs_service

__all__ = ["JobQueue", "JobsOpenToAll", "JobsService", "LocalJobQueue", "jobs_service"]
