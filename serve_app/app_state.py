"""What the routes read from the app (``app.state``), each through one typed accessor here, never a bare
``getattr``: the backend the caller attached, the settings, the API keys' gate, how prompts are read (and the
interpreter built from it, once), and the deployments' health reports, shared through one cache.

The ingress (``serve_app/ingress.py``) and the tests attach them; ``create_api`` attaches the default of
``instructions``. Still read elsewhere, for a later pass: ``event_sink`` (``runner/triggers/webhook.py``) and ``jobs``
(``jobs_api/routes.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import Request
from starlette.applications import Starlette

from deployments.common.errors import ServiceError
from serve_app.backend import Backend
from serve_app.health import HealthCache
from serve_app.settings import Settings, get_settings

if TYPE_CHECKING:  # types only: these packages read the app's state through this module
    from serve_app.auth.guard import Gate
    from serve_app.instructions import InstructionInterpreter, InstructionsConfig
    from serve_app.llm import LlmClient


class ServiceStarting(ServiceError):
    """A request arrived before the backend was attached: 503 with ``Retry-After``, worth retrying in seconds."""

    code = "unavailable"
    http_status = 503


def backend_of(request: Request) -> Backend:
    backend = getattr(request.app.state, "backend", None)
    if backend is None:
        raise ServiceStarting("the service is starting: no backend is attached yet; retry in a few seconds")
    return backend


def language_model_of(request: Request) -> LlmClient | None:
    """The app's language model (the backend's: an endpoint or the LLM deployment); None without one, or before a
    backend is attached."""
    backend = getattr(request.app.state, "backend", None)
    return None if backend is None else backend.llm


def settings_of(request: Request) -> Settings:
    return getattr(request.app.state, "settings", None) or get_settings()


def gate_of(app: Starlette) -> Gate | None:
    """The API keys and their limiter (``request.app``, or ``scope["app"]`` in a middleware); None without keys."""
    return getattr(app.state, "gate", None)


def instructions_of(request: Request) -> InstructionsConfig:
    """How prompts are read: the Serve YAML's ``args.instructions`` (``create_api`` attaches the defaults)."""
    return request.app.state.instructions


def instruction_interpreter_of(
    request: Request, build: Callable[[InstructionsConfig], InstructionInterpreter]
) -> InstructionInterpreter:
    """The interpreter ``build`` makes from ``instructions_of(request)``: built on the first call, kept on the app."""
    interpreter = getattr(request.app.state, "instruction_interpreter", None)
    if interpreter is None:
        interpreter = request.app.state.instruction_interpreter = build(instructions_of(request))
    return interpreter


async def health_reports(request: Request) -> dict[str, dict[str, Any]]:
    """Every deployment's health report, fetched at most once per ``health_cache_s`` for all routes together."""
    cache = getattr(request.app.state, "health_cache", None)
    if cache is None:
        cache = request.app.state.health_cache = HealthCache(
            backend_of(request).health, settings_of(request).health_cache_s
        )
    return await cache.get()
