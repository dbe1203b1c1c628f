"""``KeyLimits``: the one named, detached Ray actor that holds every key's token bucket and daily counter, so limits
hold across ingress replicas. The only Ray code of ``serve_app.auth``.

When it restarts (its node lost, or the process killed), Ray starts it again (``max_restarts=-1``) with empty
counters: buckets start full and today's job counts from zero, so a key may get up to one more burst and one more
daily quota that day. While it restarts, protected routes answer 503 ``unavailable`` with ``Retry-After`` (no
request passes unchecked). Detached, it outlives a redeploy of the application.
"""

from __future__ import annotations

import asyncio

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

from serve_app.auth.errors import LimitsUnavailable
from serve_app.auth.keys import ApiKey
from serve_app.auth.limits import Decision, LimitBook, Usage

ACTOR_NAME = "portrait-key-limits"
ACTOR_NAMESPACE = "portrait"


@ray.remote(num_cpus=0, max_restarts=-1)
class KeyLimits:
    def __init__(self) -> None:
        self._book = LimitBook()

    def take(self, key: ApiKey, job: bool) -> Decision:
        return self._book.take(key, job=job)

    def usage(self, key: ApiKey) -> Usage:
        return self._book.usage(key)


class RayLimiter:
    """The ``Limiter`` every ingress replica shares: the named actor, created by whichever replica asks first."""

    def __init__(self, timeout_s: float = 2.0) -> None:
        self._timeout_s = timeout_s
        self._actor = KeyLimits.options(
            name=ACTOR_NAME, namespace=ACTOR_NAMESPACE, lifetime="detached", get_if_exists=True
        ).remote()

    async def take(self, key: ApiKey, *, job: bool) -> Decision:
        return await self._ask(self._actor.take.remote(key, job))

    async def usage(self, key: ApiKey) -> Usage:
        return await self._ask(self._actor.usage.remote(key))

    async def _ask(self, reference: ray.ObjectRef) -> object:
        try:
            return await asyncio.wait_for(reference, self._timeout_s)
        except (TimeoutError, RayActorError, ActorDiedError, ActorUnavailableError) as exc:
            raise LimitsUnavailable(
                "the key limits are restarting; retry in a second", details={"retry_after_s": 1.0}
            ) from exc
