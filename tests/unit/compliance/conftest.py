"""The real engines in-process (the bucket fixtures) and the fake OpenAI-compatible server of the instruction tests."""

from tests.unit.instructions.instruction_fixtures import fake_llm  # noqa: F401
from tests.unit.runner.bucket_fixtures import job_ctx, local_backend, photo_jpeg  # noqa: F401
