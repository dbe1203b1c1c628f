"""Asynchronous jobs over the bucket runner's machinery (docs/buckets-and-jobs.md "Asynchronous jobs"): submit, poll
or be called back, results that expire. No Ray: the Serve wiring lives in ``serve_app.ingress`` and
``serve_app.bucket.deployment``."""

from serve_app.jobs_api.config import JobsConfig
from serve_app.jobs_api.runner import JobsRunner, job_routes
from serve_app.jobs_api.service import JobQueue, JobsService, LocalJobQueue
from serve_app.jobs_api.store import JobStore

__all__ = ["JobQueue", "JobStore", "JobsConfig", "JobsRunner", "JobsService", "LocalJobQueue", "job_routes"]
