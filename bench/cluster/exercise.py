"""The run under load: the worker's raylet killed part-way, then the report of what the clients and the bucket saw."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.cluster.deploy import replica_nodes, serve_details
from bench.cluster.load import Tally, clients, health_poller, longest_gap_s, record_watcher, uploader
from bench.cluster.nodes import TwoNodeCluster


async def exercise(cluster: TwoNodeCluster, url: str, buckets: Path, args: argparse.Namespace) -> dict:
    inbox, outbox = buckets / "in", buckets / "out"
    tally, seen, done = Tally(), {}, asyncio.Event()
    start = time.monotonic()
    until = start + args.before_s + args.after_s
    load = asyncio.ensure_future(clients(url, args.clients, until, args.retries, tally))
    health = asyncio.ensure_future(health_poller(url, until, tally))
    watcher = asyncio.ensure_future(record_watcher(outbox, done, seen))
    uploads = asyncio.ensure_future(uploader(inbox, args.photos, args.upload_every_s))
    await asyncio.sleep(args.before_s)
    before = replica_nodes(serve_details(cluster.dashboard))
    killed_at, killed_wall = time.monotonic(), datetime.now(UTC)
    pid = cluster.kill_worker_raylet()
    print(f"t={killed_at - start:.1f}s: killed the worker raylet (pid {pid})", flush=True)
    await load
    await health
    keys = await uploads
    after = replica_nodes(serve_details(cluster.dashboard))
    deadline = time.monotonic() + args.drain_s
    while time.monotonic() < deadline and not all(_record_of(k, outbox) for k in keys):
        await asyncio.sleep(1.0)
    await asyncio.sleep(2 * args.poll_interval_s)  # one more scan: a duplicate would be written now
    done.set()
    await watcher
    lost = [k for k in keys if not _record_of(k, outbox)]
    duplicated = [
        k
        for k in keys
        if len(seen.get(f"{Path(k).stem}.json", set())) > 1
        or len(seen.get(f"_errors/{k}.json", set())) > 1
        or (f"{Path(k).stem}.json" in seen and f"_errors/{k}.json" in seen)
    ]
    finished = [_finished_at(outbox / f"{Path(k).stem}.json") for k in keys]
    after_kill = sorted(t for t in finished if t is not None and t > killed_wall)
    health_seen: dict[str, int] = {}
    for _, seen_as, _, _ in tally.health:
        health_seen[seen_as] = health_seen.get(seen_as, 0) + 1
    later = [(t, seen_as, body) for t, seen_as, _, body in tally.health if t >= killed_at + args.healthz_probe_after_s]
    return {
        "requests_sent": tally.sent,
        "requests_ok": tally.ok,
        "attempts": tally.attempts,
        "failures": tally.failures,
        "retried": tally.retried,
        "ok_pct": round(100 * tally.ok / max(tally.sent, 1), 2),
        "longest_gap_s": round(longest_gap_s(tally.successes_at, start, until), 2),
        "longest_gap_after_kill_s": round(
            longest_gap_s([t for t in tally.successes_at if t > killed_at], killed_at, until), 2
        ),
        "uploads": len(keys),
        "results": sum(1 for k in keys if (outbox / f"{Path(k).stem}.json").exists()),
        "error_records": sum(1 for k in keys if (outbox / "_errors" / f"{k}.json").exists()),
        "lost": lost,
        "duplicated": duplicated,
        "bucket_runner_before": before.get("BucketRunner"),
        "bucket_runner_after": after.get("BucketRunner"),
        "results_before_kill": sum(1 for t in finished if t is not None and t <= killed_wall),
        "results_after_kill": len(after_kill),
        "bucket_first_result_after_kill_s": round((after_kill[0] - killed_wall).total_seconds(), 1)
        if after_kill
        else None,
        "healthz_answers": health_seen,
        "healthz_max_s": round(max((s for _, _, s, _ in tally.health), default=float("nan")), 2),
        f"healthz_{args.healthz_probe_after_s:g}s_after_kill": _health_summary(later[0]) if later else None,
        "healthz_at_the_end": _health_summary(later[-1]) if later else None,
    }


def _health_summary(sample: tuple[float, str, dict]) -> dict:
    """What ``/healthz`` said: its answer and every deployment that gave a reason."""
    _, seen_as, body = sample
    deployments = body.get("deployments", {})
    return {"answer": seen_as} | {
        n: f"{r.get('status')}: {r['reason']}" for n, r in deployments.items() if r.get("reason")
    }


def _finished_at(record: Path) -> datetime | None:
    with contextlib.suppress(OSError, ValueError, KeyError):
        return datetime.fromisoformat(json.loads(record.read_text(encoding="utf-8"))["finished_at"])
    return None


def _record_of(key: str, outbox: Path) -> bool:
    return (outbox / f"{Path(key).stem}.json").exists() or (outbox / "_errors" / f"{key}.json").exists()
