"""Operations: ``/healthz`` (readiness, for load balancers) and ``/livez`` (liveness).

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from deployments.common.weights import fix_command
from serve_app import __version__
from serve_app.app_state import health_reports, settings_of
from serve_app.auth import current_key, shows_details
from serve_app.health import fallbacks_of, overall_status
from serve_app.schemas import HealthOut

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def healthz(request: Request) -> JSONResponse:
    """Readiness: every deployment asked within ``PORTRAIT_HEALTH_TIMEOUT_S`` (at most once per
    ``PORTRAIT_HEALTH_CACHE_S``); 200 when ``ok`` or ``degraded``, 503 when ``failing`` (a deployment a job needs has
    no running replica or does not answer). For load balancers; ``/livez`` is the liveness probe. Only ``status`` and
    ``version`` unless the request carries a valid API key or, without keys configured,
    ``PORTRAIT_PUBLIC_HEALTH_DETAIL`` is set."""
    deployments = await health_reports(request)
    status = overall_status(deployments)
    code = 503 if status == "failing" else 200
    if not _shows_reports(request):
        return JSONResponse(HealthOut(status=status, version=__version__).model_dump(exclude_none=True), code)
    fallbacks = fallbacks_of(deployments)
    missing = [name for fallback in fallbacks for name in fallback.missing_models]
    body = HealthOut(
        status=status,
        version=__version__,
        deployments=deployments,
        models=[model for report in deployments.values() for model in report.get("models", [])],
        fallbacks=fallbacks,
        fix=fix_command(missing) if missing else None,
    )
    return JSONResponse(body.model_dump(), status_code=code)


@router.get("/livez")
async def livez() -> dict:
    """Liveness: this ingress replica answers, asking no other deployment (never restart on a model's state)."""
    return {"status": "alive", "version": __version__}


def _shows_reports(request: Request) -> bool:
    """A valid API key sees every deployment's report; without keys configured, the operator's setting decides (the
    reports name replicas, pids, local paths, bucket names and error texts)."""
    if not shows_details(request):
        return False
    return current_key() is not None or settings_of(request).public_health_detail
