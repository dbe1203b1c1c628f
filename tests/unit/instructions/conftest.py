"""The bucket fixtures (real engines in-process, photos as bytes) and the plain-language ones."""

from tests.unit.instructions.instruction_fixtures import api, fake_llm, photo_server, rules  # noqa: F401
from tests.unit.runner.bucket_fixtures import faceless_png, job_ctx, local_backend, photo_jpeg  # noqa: F401
