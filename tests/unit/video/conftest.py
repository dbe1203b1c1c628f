"""The bucket and jobs fixtures, for videos through the same paths as photos."""

from tests.unit.jobs_api.conftest import jobs_app  # noqa: F401
from tests.unit.runner.bucket_fixtures import job_ctx, local_backend  # noqa: F401
