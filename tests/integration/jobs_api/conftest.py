"""The bucket fixtures (real engines in-process, photos as bytes), shared with the jobs API's S3 tests."""

from tests.unit.runner.bucket_fixtures import faceless_png, job_ctx, local_backend, photo_jpeg  # noqa: F401
