"""Operations: ``/healthz`` (readiness, for load balancers) and ``/livez`` (liveness).

(No ``from __future__ import annotations`` here: FastAPI resolves the route annotations at run time.)
"""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from deployments.common.weights import fix_command
from serve_app import __version__
from serve_app.app_state import backend_of
from serve_app.auth import shows_details
from serve_app.health import fallbacks_of, overall_status
from serve_app.schemas import HealthOut

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut}})
async def healthz(request: Request) -> JSONResponse:
    """Readiness: every deployment asked within ``PORTRAIT_HEALTH_TIMEOUT_S``; 200 when ``ok`` or ``degraded``,
    503 when ``failing`` (a deployment a job needs has no running replica or does not answer). For load
    balancers; ``/livez`` is the liveness probe. With API keys configured, only a key sees more than ``status``."""
    deployments = await backend_of(request).health()
    models = [model for report in deployments.values() for model in report.get("models", [])]
    status = overall_status(deployments)
    if not shows_details(request):  # API keys configured and none sent: the verdict only
        return JSONResponse({"status": status}, status_code=503 if status == "failing" else 200)
    fallbacks = fallbacks_of(deployments)
    missing = [name for fallback in fallbacks for name in fallback.missing_models]
    body = HealthOut(
        status=status,
        version=__version__,
        deployments=deployments,
        models=models,
        fallbacks=fallbacks,
        fix=fix_command(missing) if missing else None,
    )
    return JSONResponse(body.model_dump(), status_code=503 if status == "failing" else 200)


@router.get("/livez")
async def livez() -> dict:
    """Liveness: this ingress replica answers, asking no other deployment (never restart on a model's state)."""
    return {"status": "alive", "version": __version__}
