"""The edit tests run the real in-process engines (the bucket tests' fixtures)."""

from tests.unit.runner.bucket_fixtures import local_backend  # noqa: F401
