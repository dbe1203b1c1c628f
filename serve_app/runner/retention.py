"""Retention: what expires is deleted, by a sweep the bucket runner runs every few seconds. No Ray.

A bucket route with ``retention_s`` loses, once they are older than that: each source that has a record (a source
without one would just be processed again; one not yet recorded is left alone), and every result and record in its
output. Jobs of the jobs API expire by their own ``retention_s`` (``JobsRunner.sweep``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from serve_app.runner.records import find_records, record_names
from serve_app.runner.routing import Route
from storage.base import ObjectStore, open_store

logger = logging.getLogger(__name__)

Sweep = Callable[[datetime], int]  # deletes what expired by then; returns how many objects


def sweep_route(route: Route, now: datetime, opener: Callable[..., ObjectStore] = open_store) -> int:
    """Delete what of ``route`` is older than its ``retention_s`` (sources first); returns the objects deleted."""
    if route.retention_s is None:
        return 0
    cutoff = now - timedelta(seconds=route.retention_s)
    source, output = opener(route.input, route.store), opener(route.output, route.store)
    deleted = 0
    for info in list(source.list()):
        if route.accepts(info.key) and info.last_modified < cutoff and find_records(output, record_names(info.key)):
            source.delete(info.key)
            deleted += 1
    for info in list(output.list()):
        if info.last_modified < cutoff:
            output.delete(info.key)
            deleted += 1
    return deleted


async def sweep_forever(
    sweeps: Mapping[str, Sweep], interval_s: float, on_deleted: Callable[[str, int], None] | None = None
) -> None:
    """Run every sweep (by kind: ``job``, ``bucket``) each interval; a failed sweep is logged and tried again."""
    while True:
        for kind, sweep in sweeps.items():
            try:
                deleted = await asyncio.to_thread(sweep, datetime.now(UTC))
            except Exception:
                logger.exception("%s retention sweep failed; next try in %.0f s", kind, interval_s)
                continue
            if deleted:
                logger.info("%s retention: %d objects deleted", kind, deleted)
                if on_deleted is not None:
                    on_deleted(kind, deleted)
        await asyncio.sleep(interval_s)
