"""The real engines in-process and small photos, as the bucket tests use them."""

from tests.unit.runner.bucket_fixtures import faceless_png, job_ctx, local_backend, photo_jpeg  # noqa: F401
