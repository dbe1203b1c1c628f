"""Fault test for the bucket trigger: kill replicas while a folder of uploads is processed; count lost and duplicated.

Needs a running ``serve run configs/local.yaml`` (its folder route reads ``./buckets/in`` and writes
``./buckets/out``; the poller picks up new files every ``poll_interval_s``). The test writes ``--photos`` uploads
(plus a text file and a truncated JPEG) under a fresh prefix, kills one replica of each ``--kill`` deployment
every ``--kill-every-s`` seconds (the BucketRunner itself included), waits until every upload has exactly one
result or error record, and prints a table. Bounded: it stops after ``--timeout-s``.

    python -m bench.fault_test --photos 40 --kill FaceAnalyzer,FaceRestorer512,BucketRunner --kill-every-s 8
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np
from PIL import Image

from bench.load_test import ReplicaKiller


def write_uploads(inbox: Path, photos: int) -> list[str]:
    from skimage import data

    astronaut = data.astronaut()
    keys = []
    for index in range(photos):
        side = 192 + 16 * (index % 8)
        image = Image.fromarray(np.ascontiguousarray(astronaut)).resize((side, side))
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=85)
        keys.append(f"photo {index:03d}.jpg")
        (inbox / keys[-1]).write_bytes(buffer.getvalue())
    (inbox / "notes.jpg").write_bytes(b"this is a text file named like a photo\n")
    (inbox / "truncated.jpg").write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 3])
    return keys + ["notes.jpg", "truncated.jpg"]


def records_for(output_root: Path, key: str) -> tuple[int, int]:
    """(result metadata files, error records) for one upload key (keys are relative to the route's folders)."""
    stem = key.rsplit(".", 1)[0]
    results = 1 if (output_root / f"{stem}.json").is_file() else 0
    errors = 1 if (output_root / "_errors" / f"{key}.json").is_file() else 0
    return results, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--buckets", type=Path, default=Path("buckets"))
    parser.add_argument("--photos", type=int, default=40)
    parser.add_argument("--kill", default="FaceAnalyzer,FaceRestorer512,BucketRunner")
    parser.add_argument("--kill-every-s", type=float, default=8.0)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--ray-address", default="auto")
    args = parser.parse_args()
    prefix = f"fault-{int(time.time())}"
    inbox, output_root = args.buckets / "in" / prefix, args.buckets / "out"
    inbox.mkdir(parents=True)
    killer = ReplicaKiller(args.ray_address, args.kill.split(","), args.kill_every_s)
    killer.start()
    start = time.monotonic()
    keys = [f"{prefix}/{name}" for name in write_uploads(inbox, args.photos)]
    pending = set(keys)
    while pending and time.monotonic() - start < args.timeout_s:
        time.sleep(2.0)
        pending = {key for key in pending if sum(records_for(output_root, key)) == 0}
    killer.stop()
    counts = {key: records_for(output_root, key) for key in keys}
    lost = [key for key, (results, errors) in counts.items() if results + errors == 0]
    duplicated = [key for key, (results, errors) in counts.items() if results + errors > 1]
    print("| uploads | results | error records | lost | duplicated | replicas killed | seconds |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {len(keys)} | {sum(r for r, _ in counts.values())} | {sum(e for _, e in counts.values())} | "
        f"{len(lost)} | {len(duplicated)} | {killer.killed} | {time.monotonic() - start:.0f} |"
    )
    if lost or duplicated:
        print("lost:", lost, "duplicated:", duplicated)


if __name__ == "__main__":
    main()
