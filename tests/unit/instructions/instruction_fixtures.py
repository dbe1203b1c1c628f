"""Fixtures of the plain-language tests: the rule engine on the shipped presets, the API on the real engines
in-process, a fake OpenAI-compatible chat server."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

from serve_app.instructions import RuleInterpreter, rule_interpreter
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.unit.instructions.fake_llm import FakeChatServer


@pytest.fixture(scope="session")
def rules(job_ctx) -> RuleInterpreter:
    return rule_interpreter(job_ctx)


@pytest.fixture
def api(local_backend, mediapipe_dir) -> FastAPI:
    """The HTTP API on the real engines (GPEN and DCT-Net weights absent: their classic engines answer)."""
    app = create_api()
    app.state.backend = local_backend
    app.state.settings = Settings(model_store=str(mediapipe_dir.parent))
    return app


@pytest.fixture
def fake_llm():
    with FakeChatServer() as server:
        yield server
