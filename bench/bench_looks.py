"""The LOOK engine (the edit job's film looks): CPU time per look on a 2 MP photo, and how far each look moves each
evaluation face by the identity judge: the look alone (the photo before the look against the photo after; no
restorer), and through the edit job as a caller gets it (its defaults: the faces restored first, the restored face
judged against the edited one; ``meta.identity``, the lowest face of each photo).

    python bench/bench_looks.py [--eval-dir ../shared/eval] [--repeats 5]

Results: docs/BENCHMARKS.md ("Film looks").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import cv2
import numpy as np
from skimage import data

from deployments.common.image import decode_image
from deployments.common.weights import ModelStore, load_manifest
from deployments.edit.looks import apply_look, default_looks
from deployments.faces.types import ANALYZE_FACES
from serve_app.jobs.identity import judge_pairs, judged_face
from serve_app.local_backend import in_process_backend
from serve_app.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[1]


def cpu_times(repeats: int) -> None:
    photo = cv2.resize(np.ascontiguousarray(data.astronaut()), (1732, 1155), interpolation=cv2.INTER_CUBIC)  # 2.0 MP
    cv2.setNumThreads(1)
    print(f"CPU time per look, {photo.shape[1]}x{photo.shape[0]} (2.0 MP), one OpenCV thread, median of {repeats}")
    for name, look in default_looks().items():
        times = []
        for seed in range(repeats):
            start = time.process_time()
            apply_look(photo, look, seed)
            times.append(time.process_time() - start)
        print(f"  {name:12s} {statistics.median(times) * 1000:6.0f} ms")


async def identities(eval_dir: Path) -> None:
    settings = Settings()
    backend = in_process_backend(ModelStore(settings.model_store, load_manifest(settings.models_manifest)))
    photos = sorted(p for p in eval_dir.glob("*/*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    rows: dict[str, list[float]] = {name: [] for name in default_looks()}
    for path in photos:
        rgb = decode_image(path.read_bytes(), max_bytes=64 << 20, max_pixels=64 << 20).rgb
        faces = [f for f in await backend.call(ANALYZE_FACES, rgb) if f.eye_distance_px >= 20]
        for name, look in default_looks().items():
            out = apply_look(rgb, look, seed=0)
            pairs = [(judged_face(rgb, face), judged_face(out, face)) for face in faces]
            rows[name] += [identity.similarity for identity in await judge_pairs(backend, pairs)]
    count = len(next(iter(rows.values())))
    print(
        f"identity similarity per look over {count} faces of {len(photos)} photos (same person at >= 0.70 on dlib's "
        "scale, 1 - distance)"
    )
    for name, values in rows.items():
        print(
            f"  {name:12s} mean {np.mean(values):.3f}  min {np.min(values):.3f}  below the bar: "
            f"{sum(v < 0.70 for v in values)}"
        )


async def through_the_job(eval_dir: Path) -> None:
    from serve_app.jobs import job_context, parse_job_params, run_job

    settings = Settings()
    context = job_context(settings)
    backend = in_process_backend(ModelStore(settings.model_store, load_manifest(settings.models_manifest)))
    photos = sorted(p for p in eval_dir.glob("*/*") if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    print(f"through POST /v1/edit's job (restore=true, identity_keep=0, strength 1), {len(photos)} photos:")
    for name in default_looks():
        params = parse_job_params("edit", {"look": name, "return": "json"}, context)
        lowest = []
        for path in photos:
            result = await run_job(backend, "edit", path.read_bytes(), params, context)
            if result.meta.identity and "similarity" in result.meta.identity:
                lowest.append((result.meta.identity["similarity"], path.name))
        worst = min(lowest)
        failing = [photo for similarity, photo in lowest if similarity < 0.70]
        print(f"  {name:12s} photos with faces {len(lowest)}  lowest {worst[0]:.3f} ({worst[1]})  below: {failing}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-dir", type=Path, default=REPO_ROOT.parent / "shared" / "eval")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cpu_times(args.repeats)
    if args.eval_dir.is_dir():
        asyncio.run(identities(args.eval_dir))
        asyncio.run(through_the_job(args.eval_dir))
    else:
        print(f"{args.eval_dir} is absent: no identity figures")


if __name__ == "__main__":
    main()
