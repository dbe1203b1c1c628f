"""The ID-photo job with and without formal clothes (#35, tier 0) on a CPU: what ``attire`` adds.

For each evaluation photo (``../shared/eval/idphoto/hivision_test*.jpg``, skipped when absent) and skimage's
astronaut: the whole job's time without attire and with each template (median of ``--repeats`` after the first), the
job's ``idphoto.attire_ms`` phase (the photo's parse included), and the first use of each template in this process
(its drawing included, once per process). Then the two parts that #35's seam check added, on each photo scaled to
2 MP: the fallback parse (matte + face mesh) and the report's seam check (both seam measures of one dressed person).
Run it on one core, as the issue's budget is stated (tier 0 costs at most 150 ms more):

    taskset -c 0 .venv/bin/python bench/bench_attire.py --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
os.chdir(REPO_ROOT)

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from deployments.common.image import decode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.faces.analyze import FaceAnalysisPredictor  # noqa: E402
from deployments.idphoto.attire import BUILTIN_TEMPLATES, dress  # noqa: E402
from deployments.idphoto.params import parse_params  # noqa: E402
from deployments.idphoto.parse import parse_portrait  # noqa: E402
from deployments.idphoto.pipeline import make_id_photo  # noqa: E402
from deployments.idphoto.predictor import MattingPredictor  # noqa: E402
from deployments.idphoto.report import attire_checks  # noqa: E402
from serve_app.jobs import job_context, parse_job_params, run_job  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.settings import Settings  # noqa: E402

TEMPLATES = ["suit-tie", "suit", "women-suit", "white-shirt", "blouse", "school-uniform"]
PARTS_PIXELS = 2_000_000


def photos() -> dict[str, bytes]:
    from skimage import data

    found: dict[str, bytes] = {}
    for path in sorted((REPO_ROOT.parent / "shared" / "eval" / "idphoto").glob("hivision_test*.jpg")):
        found[path.stem] = path.read_bytes()
    buffer = io.BytesIO()
    Image.fromarray(data.astronaut()).save(buffer, "PNG")
    found["astronaut"] = buffer.getvalue()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--templates", default=",".join(TEMPLATES))
    args = parser.parse_args()
    store = ModelStore("models", load_manifest("configs/models.yaml"))
    backend = in_process_backend(store)
    ctx = job_context(Settings())

    def job(photo: bytes, attire: str) -> tuple[float, float | None]:
        params = parse_job_params("idphoto", {"spec": "cn-2inch", "background": "blue", "attire": attire}, ctx)
        start = time.perf_counter()
        result = asyncio.run(run_job(backend, "idphoto", photo, params, ctx))
        return (time.perf_counter() - start) * 1000.0, result.meta.timings_ms.get("idphoto.attire_ms")

    templates = args.templates.split(",")
    print(f"cpu affinity: {sorted(os.sched_getaffinity(0))}, repeats {args.repeats}")
    all_photos = photos()
    job(next(iter(all_photos.values())), "none")  # the models' first use is not the clothes'
    first_use: dict[str, tuple[float, float | None]] = {}
    for name, photo in all_photos.items():
        plain = statistics.median(job(photo, "none")[0] for _ in range(args.repeats))
        print(f"{name}: job without attire {plain:7.1f} ms")
        for template in templates:
            if template not in first_use:
                first_use[template] = job(photo, template)
                total, phase = first_use[template]
                print(f"  {template:15s} first use in this process: job {total:7.1f} ms, attire phase {phase:6.1f} ms")
            runs = [job(photo, template) for _ in range(args.repeats)]
            total = statistics.median(r[0] for r in runs)
            phase = statistics.median(r[1] or 0.0 for r in runs)
            print(f"  {template:15s} job {total:7.1f} ms (+{total - plain:6.1f} ms), attire phase {phase:6.1f} ms")
    seam_parts(store, all_photos, args.repeats)


def seam_parts(store: ModelStore, all_photos: dict[str, bytes], repeats: int) -> None:
    """The fallback parse and the seam check alone, on each photo scaled to ``PARTS_PIXELS`` (median of
    ``repeats``): what the attire phase and the report phase gained."""
    analyzer = FaceAnalysisPredictor(store.local_path("face-detect-short").parent)
    matter = MattingPredictor.from_store(store)
    for name, photo in all_photos.items():
        rgb = decode_image(photo).rgb
        factor = (PARTS_PIXELS / (rgb.shape[0] * rgb.shape[1])) ** 0.5
        size_wh = (round(rgb.shape[1] * factor), round(rgb.shape[0] * factor))
        rgb = cv2.resize(rgb, size_wh, interpolation=cv2.INTER_CUBIC)
        faces = analyzer.analyze(rgb)
        low = matter.segment(rgb, "modnet")
        alpha = np.clip(np.rint(matter.matte(rgb, "modnet") * 255.0), 0, 255).astype(np.uint8)
        parse_ms = []
        for _ in range(repeats):
            start = time.perf_counter()
            parse = parse_portrait(rgb, alpha, faces)
            parse_ms.append((time.perf_counter() - start) * 1000.0)
        fit = dress(rgb, alpha, faces[0], BUILTIN_TEMPLATES["suit-tie"], parse=parse).fit
        params = parse_params({"spec": "cn-2inch", "background": "blue", "attire": "suit-tie"})
        framing = make_id_photo(rgb, faces, low, params).framing
        seam_ms = []
        for _ in range(repeats):
            start = time.perf_counter()
            attire_checks([fit], parse.labels, framing.affine, framing.size_wh, "en")
            seam_ms.append((time.perf_counter() - start) * 1000.0)
        print(
            f"{name} at {size_wh[0]}x{size_wh[1]}: parse {statistics.median(parse_ms):6.1f} ms, "
            f"seam check {statistics.median(seam_ms):5.2f} ms"
        )


if __name__ == "__main__":
    main()
