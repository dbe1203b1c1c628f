"""Whole ID photo from a 12 MP JPEG, one request at a time, per matting mode: decode, faces, matte, compose, encode.

    .venv/bin/python bench/bench_idphoto.py [--repeats 20] [--threads 1] [--modes modnet,selfie] [--image PATH]
        [--variants plain,looks,looks+hd]

The input is an eval portrait (``../shared/eval/idphoto/hivision_test0.jpg``) or, without ``../shared``, the
scikit-image astronaut, upscaled to 3000x4000 (portrait orientation, like a phone) and encoded as a JPEG (quality
92) once; every request decodes it again, at the scale the job needs (JPEG DCT scaling: half size for the common
presets), as the service does. Reports p50/p90 of the whole request and the median per stage. ``total``
is the sequential sum; ``served`` is what the Serve graph waits for, where face detection and matting run
concurrently on their own replicas (decode + max(faces, matte) + the rest).

``--variants`` composes the same decoded photo, faces and matte several ways per repeat: ``plain`` (the defaults),
``looks`` (all five touch-ups, the mirror and a watermark), ``looks+hd`` (and the HD copy); their ``compose``
difference is what the looks cost. ``cpu_ms`` is the process's CPU time per request: on a shared, loaded machine it
is what the request costs a free core (wall times include the wait).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import decode_image, encode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor  # noqa: E402
from deployments.idphoto.params import parse_params  # noqa: E402
from deployments.idphoto.pipeline import make_id_photo, source_min_side_px  # noqa: E402
from deployments.idphoto.predictor import MattingPredictor  # noqa: E402

DEFAULT_IMAGE = REPO_ROOT.parent / "shared" / "eval" / "idphoto" / "hivision_test0.jpg"
SIZE_12MP_WH = (3000, 4000)
LOOKS = {
    "whitening_strength": 10,
    "brightness_strength": 10,
    "contrast_strength": 10,
    "saturation_strength": 10,
    "sharpen_strength": 2,
    "horizontal_flip": True,
    "watermark_text": "仅供办证 ID ONLY",
}
VARIANTS = {"plain": {}, "looks": LOOKS, "looks+hd": {**LOOKS, "hd": True}}
LOOK_STAGES = ("touchup_ms", "watermark_ms", "hd_ms")


def portrait_jpeg(path: Path | None) -> tuple[bytes, str]:
    if path is None and DEFAULT_IMAGE.is_file():
        path = DEFAULT_IMAGE
    if path is not None:
        rgb, name = decode_image(path.read_bytes()).rgb, path.name
    else:
        from skimage import data

        rgb, name = np.ascontiguousarray(data.astronaut()), "skimage astronaut"
    size_wh = SIZE_12MP_WH if rgb.shape[0] >= rgb.shape[1] else SIZE_12MP_WH[::-1]
    big = cv2.resize(rgb, size_wh, interpolation=cv2.INTER_CUBIC)
    return encode_image(big, "jpeg", quality=92), f"{name} upscaled to {size_wh[0]}x{size_wh[1]}"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[int(round(q * (len(ordered) - 1)))], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (a replica uses 1)")
    parser.add_argument("--modes", default="modnet,selfie")
    parser.add_argument("--spec", default="cn-1inch")
    parser.add_argument("--image", type=Path, default=None)
    parser.add_argument("--models", type=Path, default=REPO_ROOT / "models")
    parser.add_argument("--variants", default="plain", type=lambda text: text.split(","), help=", ".join(VARIANTS))
    args = parser.parse_args()

    cv2.setNumThreads(args.threads)
    torch.set_num_threads(args.threads)
    data, image_name = portrait_jpeg(args.image)
    store = ModelStore(args.models, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    analyzer = FaceAnalysisPredictor(args.models / "mediapipe", FaceAnalysisConfig(num_threads=args.threads))
    matter = MattingPredictor.from_store(store, num_threads=args.threads)
    results = {}
    for mode in args.modes.split(","):
        variants = {
            name: parse_params({"spec": args.spec, "matting": mode, **VARIANTS[name]}) for name in args.variants
        }
        min_side_px = source_min_side_px(variants[args.variants[0]].resolve_spec())
        stages: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
        for repeat in range(args.repeats + 1):  # the first run warms up interpreters and caches
            shared: dict[str, float] = {}
            cpu_start = time.process_time()
            start = time.perf_counter()
            rgb = decode_image(data, min_side_px=min_side_px).rgb
            shared["decode_ms"] = (time.perf_counter() - start) * 1000.0
            start = time.perf_counter()
            faces = analyzer.analyze(rgb)
            shared["faces_ms"] = (time.perf_counter() - start) * 1000.0
            start = time.perf_counter()
            low = matter.segment(rgb, mode)
            shared["matte_ms"] = (time.perf_counter() - start) * 1000.0
            shared_cpu_ms = (time.process_time() - cpu_start) * 1000.0
            for name, params in variants.items():
                cpu_start = time.process_time()
                outcome = make_id_photo(rgb, faces, low, params)
                cpu_ms = shared_cpu_ms + (time.process_time() - cpu_start) * 1000.0
                timings = {**shared, "compose_ms": outcome.timings_ms["total_ms"]}
                timings["total_ms"] = sum(timings.values())
                timings["served_ms"] = (
                    timings["decode_ms"] + max(timings["faces_ms"], timings["matte_ms"]) + timings["compose_ms"]
                )
                timings |= {stage: outcome.timings_ms.get(stage, 0.0) for stage in LOOK_STAGES}
                timings["cpu_ms"] = cpu_ms
                if repeat:
                    for stage, value in timings.items():
                        stages[name].setdefault(stage, []).append(value)
        for name, measured in stages.items():
            results[f"{mode}/{name}" if len(variants) > 1 else mode] = {
                "p50_total_ms": percentile(measured["total_ms"], 0.5),
                "p90_total_ms": percentile(measured["total_ms"], 0.9),
                "p50_served_ms": percentile(measured["served_ms"], 0.5),
                "p50_cpu_ms": percentile(measured["cpu_ms"], 0.5),
                "median_ms": {stage: round(statistics.median(v), 1) for stage, v in measured.items()},
            }
    print(
        json.dumps(
            {
                "image": image_name,
                "decoded_wh": [rgb.shape[1], rgb.shape[0]],
                "jpeg_bytes": len(data),
                "spec": args.spec,
                "repeats": args.repeats,
                "threads": args.threads,
                "load_average": [round(v, 2) for v in os.getloadavg()],
                "modes": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
