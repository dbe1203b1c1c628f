"""What every route reads from the app: the backend the caller attached, the settings (``app.state``) and the
deployments' health reports, shared through one cache."""

from typing import Any

from fastapi import Request

from deployments.common.errors import ServiceError
from serve_app.backend import Backend
from serve_app.health import HealthCache
from serve_app.settings import Settings, get_settings


class ServiceStarting(ServiceError):
    """A request arrived before the backend was attached: 503 with ``Retry-After``, worth retrying in seconds."""

    code = "unavailable"
    http_status = 503


def backend_of(request: Request) -> Backend:
    backend = getattr(request.app.state, "backend", None)
    if backend is None:
        raise ServiceStarting("the service is starting: no backend is attached yet; retry in a few seconds")
    return backend


def settings_of(request: Request) -> Settings:
    return getattr(request.app.state, "settings", None) or get_settings()


async def health_reports(request: Request) -> dict[str, dict[str, Any]]:
    """Every deployment's health report, fetched at most once per ``health_cache_s`` for all routes together."""
    cache = getattr(request.app.state, "health_cache", None)
    if cache is None:
        cache = request.app.state.health_cache = HealthCache(
            backend_of(request).health, settings_of(request).health_cache_s
        )
    return await cache.get()
