"""``GET /v1/usage``: a key's own limits and what it has spent today. (No ``from __future__ import annotations``:
FastAPI resolves the route annotations at run time.)"""

from fastapi import APIRouter, Request
from pydantic import BaseModel

from serve_app.app_state import gate_of
from serve_app.auth.caller import current_key
from serve_app.auth.errors import NoKeys
from serve_app.schemas import ErrorOut

router = APIRouter(tags=["keys"])


class UsageOut(BaseModel):
    key: str
    day: str  # the UTC day the counter belongs to
    jobs_today: int
    daily_quota: int | None
    remaining_today: int | None
    rate_per_s: float | None
    burst: float
    tokens: float  # requests the key may send at once right now
    tasks: list[str] | None


@router.get("/v1/usage", response_model=UsageOut, responses={401: {"model": ErrorOut}, 404: {"model": ErrorOut}})
async def usage(request: Request) -> UsageOut:
    """The calling key's limits and today's jobs (404 when the service runs without keys)."""
    gate = gate_of(request.app)
    key = current_key()
    if gate is None or key is None:
        raise NoKeys("this service runs without API keys: there is no usage to show")
    spent = await gate.limiter.usage(key)
    return UsageOut(
        key=key.id,
        day=spent.day,
        jobs_today=spent.jobs_today,
        daily_quota=key.daily_quota,
        remaining_today=max(0, key.daily_quota - spent.jobs_today) if key.daily_quota is not None else None,
        rate_per_s=key.rate_per_s,
        burst=key.bucket_size,
        tokens=spent.tokens,
        tasks=sorted(key.tasks) if key.tasks is not None else None,
    )
