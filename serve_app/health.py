"""The ``/healthz`` aggregator: Serve's replica counts, every deployment asked in parallel within one bound, and the
overall verdict a load balancer acts on. No Ray here: deployments are reached through their handles (anything with
``deployment_name`` and ``health.remote()``), replica counts through a callable (``handles.ServeReplicaCounts``).

:class:`HealthCache` shares one fan-out among the open routes that need it (``/healthz``, ``/v1/models``,
``/v1/cartoon/styles``): at most one per ``health_cache_s``, whatever the request rate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from deployments.common.weights import fix_command
from serve_app.schemas import FallbackOut

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class ReplicaCount:
    """Serve's view of one deployment: replicas running and wanted, the fewest it may scale to, its status."""

    running: int
    target: int
    min_replicas: int
    serve_status: str
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "target": self.target, "serve_status": self.serve_status}


ReplicaCounts = Callable[[], Awaitable[Mapping[str, ReplicaCount]]]


def replica_counts_of(details: Mapping[str, Any], app: str) -> dict[str, ReplicaCount]:
    """``ReplicaCount`` per deployment of ``app`` from the controller's instance details (``ServeInstanceDetails``)."""
    deployments = details.get("applications", {}).get(app, {}).get("deployments", {})
    counts = {}
    for name, deployment in deployments.items():
        config = deployment.get("deployment_config", {})
        autoscaling = config.get("autoscaling_config")
        fewest = autoscaling.get("min_replicas", 1) if autoscaling else config.get("num_replicas", 1)
        counts[name] = ReplicaCount(
            running=sum(1 for replica in deployment.get("replicas", []) if _plain(replica.get("state")) == "RUNNING"),
            target=int(deployment.get("target_num_replicas", 0)),
            min_replicas=int(fewest) if isinstance(fewest, int) else 1,
            serve_status=_plain(deployment.get("status", "UNKNOWN")),
            message=str(deployment.get("message", "")),
        )
    return counts


def _plain(value: Any) -> str:
    """An enum from the controller (``DeploymentStatus.UNHEALTHY``) as its value (``UNHEALTHY``)."""
    return str(getattr(value, "value", value))


class HealthAggregator:
    """``health_timeout_s`` bounds ``reports``: a deployment that does not answer in time is reported, not awaited.
    ``replica_counts`` (Serve's view) lets it tell a deployment scaled to zero from one that lost its replicas,
    without waking either; without it every deployment is asked."""

    def __init__(
        self, probes: Mapping[str, Any], *, replica_counts: ReplicaCounts | None = None, health_timeout_s: float = 2.0
    ) -> None:
        self._probes = dict(probes)
        self._optional: set[str] = set()  # watched deployments no job route needs
        self._replica_counts = replica_counts
        self._health_timeout_s = health_timeout_s

    def watch(self, name: str, handle: Any) -> None:
        """Add a deployment no job route needs to the report (the bucket runner, when the app has one)."""
        self._probes[name] = handle
        self._optional.add(name)

    async def reports(self) -> dict[str, dict[str, Any]]:
        """Every deployment's report within ``health_timeout_s``: ``status`` ok | idle (scaled to zero) | degraded |
        failing, with a ``reason`` unless ok; ``required: false`` marks one no job route needs."""
        deadline = asyncio.get_running_loop().time() + self._health_timeout_s
        counts, serve_report = await self._read_replica_counts(self._health_timeout_s / 2)
        names = list(self._probes)
        reports = await asyncio.gather(*(self._probe(name, counts, deadline) for name in names))
        result = dict(zip(names, reports))
        if serve_report is not None:
            result["Serve"] = serve_report
        return result

    async def _read_replica_counts(self, timeout_s: float) -> tuple[Mapping[str, ReplicaCount], dict[str, Any] | None]:
        """Serve's replica counts, or none and a report saying why (the deployments are then asked directly)."""
        if self._replica_counts is None:
            return {}, None
        try:
            return await asyncio.wait_for(self._replica_counts(), timeout_s), None
        except TimeoutError:
            reason = f"the Serve controller did not answer within {timeout_s:.1f} s"
        except Exception as exc:  # reported in /healthz and logged: health must answer whatever broke
            logger.warning("reading replica counts failed: %r", exc)
            reason = f"reading replica counts failed: {type(exc).__name__}: {exc}"
        return {}, {"status": "degraded", "required": False, "reason": f"{reason}; replica counts unknown"}

    async def _probe(self, name: str, counts: Mapping[str, ReplicaCount], deadline: float) -> dict[str, Any]:
        handle = self._probes[name]
        flags = {"required": False} if name in self._optional else {}
        count = counts.get(handle.deployment_name)
        if count is not None and count.running == 0:
            return {**_without_replicas(count), **flags}
        timeout_s = max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            report = dict(await asyncio.wait_for(_ask_health(handle), timeout_s))
        except TimeoutError:
            if count is not None:  # Serve counts running replicas: busy, or one being lost; the others may serve
                reason = f"{count.running} replicas running, none answered within {timeout_s:.1f} s"
                return {"status": "degraded", "reason": reason, "replicas": count.to_json(), **flags}
            return {"status": "failing", "reason": f"no answer within {timeout_s:.1f} s", **flags}
        except Exception as exc:  # reported in /healthz and logged: health must answer whatever broke
            logger.warning("health probe of %s failed: %r", name, exc)
            return {"status": "failing", "reason": f"{type(exc).__name__}: {exc}", **flags}
        if count is not None:
            report["replicas"] = count.to_json()
            if count.running < count.target:
                short = f"{count.running} of {count.target} replicas running"
                report["reason"] = f"{report['reason']}; {short}" if report.get("reason") else short
                if report.get("status", "ok") == "ok":
                    report["status"] = "degraded"
        return {**report, **flags}


def _without_replicas(count: ReplicaCount) -> dict[str, Any]:
    """The report of a deployment with no running replica, from Serve's counts alone (asking it would wait)."""
    replicas = count.to_json()
    if count.min_replicas == 0 and count.target == 0:
        return {"status": "idle", "reason": "scaled to zero; the next request starts a replica", "replicas": replicas}
    if count.min_replicas == 0:
        reason = f"starting from zero replicas (target {count.target}); requests wait, then time out with 504"
        return {"status": "degraded", "reason": reason, "replicas": replicas}
    detail = f": {count.message}" if count.message else ""
    reason = f"no running replica (target {count.target}, Serve says {count.serve_status}{detail})"
    return {"status": "failing", "reason": reason, "replicas": replicas}


async def _ask_health(handle: Any) -> Mapping[str, Any]:
    return await handle.health.remote()


def overall_status(deployments: dict[str, dict]) -> str:
    """``failing`` when a deployment a job needs fails; ``degraded`` when anything else is short of ``ok``."""
    failing = any(r.get("status") == "failing" and r.get("required", True) for r in deployments.values())
    if failing:
        return "failing"
    return "ok" if all(r.get("status", "ok") in ("ok", "idle") for r in deployments.values()) else "degraded"


def fallbacks_of(deployments: dict[str, dict]) -> list[FallbackOut]:
    """Deployments short of a model they could load (a non-neural engine serving, or a neural one missing a helper
    such as MTCNN), each with the exact command that fetches what it lacks."""
    fallbacks = []
    for name, report in deployments.items():
        missing = [model["name"] for model in report.get("models", []) if model.get("fix")]
        if missing:
            engine = str(report.get("engine", "unknown"))
            fallbacks.append(
                FallbackOut(deployment=name, engine=engine, missing_models=missing, fix=fix_command(missing))
            )
    return fallbacks


class HealthCache(Generic[T]):
    """``fetch``'s answer, reused for ``ttl_s``; callers arriving while a fetch runs share it (one fan-out however
    many wait). A failed fetch is not kept: the next caller tries again."""

    def __init__(self, fetch: Callable[[], Awaitable[T]], ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._clock = clock
        self._value: T | None = None
        self._fetched_at = float("-inf")
        self._running: asyncio.Future[T] | None = None

    async def get(self) -> T:
        if self._value is not None and self._clock() - self._fetched_at < self._ttl_s:
            return self._value
        if self._running is None:
            self._running = asyncio.ensure_future(self._refresh())
        return await asyncio.shield(self._running)

    async def _refresh(self) -> T:
        try:
            value = await self._fetch()
            self._value, self._fetched_at = value, self._clock()
            return value
        finally:
            self._running = None
