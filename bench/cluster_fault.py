"""Lose a node under load: a two-node Ray cluster on this machine, ``configs/cluster-cpu.yaml`` deployed on it, the
worker node's raylet killed while clients send jobs and photos land in a bucket folder.

What it does, bounded in time and on 127.0.0.1 only:

1. starts a head and a worker raylet (``ray start``, each with its own ``--num-cpus``, temp dir and ports; the worker
   labelled ``portrait-fault=victim``) and deploys ``configs/cluster-cpu.yaml`` with
   ``serve deploy --address http://127.0.0.1:<dashboard>`` and ``working_dir: local://<this repo>``, adding one folder
   route (``buckets/in`` → ``buckets/out`` under an absolute ``PORTRAIT_BUCKETS_ROOT``) and placing the BucketRunner on
   the victim first (a label selector with the head as fallback), so the kill makes it move;
2. runs ``--clients`` clients in a loop (faces, restore, idphoto, cartoon; each request retried on 5xx, 408 and
   dropped connections, honouring ``Retry-After``) and drops ``--photos`` photos into the route's folder, one every
   ``--upload-every-s``; polls ``/healthz`` every second;
3. after ``--before-s`` SIGKILLs the worker's raylet (its replicas, proxy and the BucketRunner die with it) and keeps
   going for ``--after-s``; then waits until every photo has a record.

Reports requests ok / sent after client retries, the longest gap without a success, photos lost (no record) and
duplicated (a record written twice, or a result and an error record), where the BucketRunner ran before and after,
and the slowest ``/healthz``. Targets (issue 16): >= 99 % ok, no gap over 30 s, nothing lost or duplicated.
It stops its own Ray processes (by process group and by temp dir, never ``ray stop``, which would stop every Ray on
the machine) and removes its temp dir, also on failure or Ctrl-C.

    python -m bench.cluster_fault --clients 4 --before-s 30 --after-s 60 --photos 30
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench.cluster.deploy import fault_config, serve_deploy, wait_until_spread
from bench.cluster.exercise import exercise
from bench.cluster.nodes import TwoNodeCluster, free_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--retries", type=int, default=6, help="client retries per request (5xx, 408, connection)")
    parser.add_argument("--before-s", type=float, default=30.0, help="load before the kill")
    parser.add_argument("--after-s", type=float, default=60.0, help="load after the kill")
    parser.add_argument("--photos", type=int, default=30)
    parser.add_argument("--upload-every-s", type=float, default=2.0)
    parser.add_argument("--poll-interval-s", type=float, default=2.0)
    parser.add_argument("--healthz-probe-after-s", type=float, default=10.0, help="show /healthz this long after")
    parser.add_argument("--drain-s", type=float, default=180.0, help="wait this long for the last records")
    parser.add_argument("--node-cpus", type=int, default=1, help="--num-cpus of each node")
    parser.add_argument("--startup-timeout-s", type=float, default=600.0)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (logs) after the run")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="pf-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    cluster = TwoNodeCluster(root, args.node_cpus, args.node_cpus)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cluster.start()
        nodes = cluster.wait_for_nodes(2, timeout_s=120)
        print(
            f"cluster up: {[(n['node_id'][:8], n.get('labels', {}).get('portrait-fault')) for n in nodes]}", flush=True
        )
        buckets = root / "buckets"
        (buckets / "in").mkdir(parents=True)
        http_port = free_port()
        config_path = root / "cluster-cpu.yaml"
        config = fault_config(root, http_port, args.poll_interval_s)  # the route's folders: <root>/buckets/{in,out}
        config_path.write_text(yaml.safe_dump(config), encoding="utf-8")
        started = time.monotonic()
        serve_deploy(config_path, cluster.dashboard)
        url = f"http://127.0.0.1:{http_port}"
        placed = wait_until_spread(cluster.dashboard, url, {n["node_id"] for n in nodes}, args.startup_timeout_s)
        print(f"deployed in {time.monotonic() - started:.0f} s; BucketRunner on {placed['BucketRunner']}", flush=True)
        victim = [n["node_id"] for n in nodes if n.get("labels", {}).get("portrait-fault") == "victim"]
        report = asyncio.run(exercise(cluster, url, buckets, args))
        report["victim_node"] = victim
        print(json.dumps(report, indent=2))
        ok = (
            report["ok_pct"] >= 99 and report["longest_gap_s"] <= 30 and not report["lost"] and not report["duplicated"]
        )
        print("targets (>= 99 % ok, gap <= 30 s, 0 lost, 0 duplicated):", "met" if ok else "NOT met")
        if not ok:
            sys.exit(1)
    finally:
        cluster.close()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
