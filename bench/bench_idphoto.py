"""ID-photo latency on one core for a 12 MP phone portrait, stage by stage (face detection measured apart).

    .venv/bin/python bench/bench_idphoto.py [--repeats 20] [--spec cn-1inch] [--format jpeg] [--image PATH]

The input is an eval portrait (``../shared/eval/idphoto/hivision_test0.jpg``) or, without ``../shared``, the
scikit-image astronaut, upscaled to 3000x4000 (portrait orientation, like a phone). Reports the median per stage.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import decode_image  # noqa: E402
from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalyzerEngine  # noqa: E402
from deployments.idphoto.matte import PortraitMatter  # noqa: E402
from deployments.idphoto.params import parse_params  # noqa: E402
from deployments.idphoto.pipeline import make_id_photo  # noqa: E402

DEFAULT_IMAGE = REPO_ROOT.parent / "shared" / "eval" / "idphoto" / "hivision_test0.jpg"
SIZE_12MP_WH = (3000, 4000)


def load_portrait(path: Path | None) -> tuple[np.ndarray, str]:
    if path is None and DEFAULT_IMAGE.is_file():
        path = DEFAULT_IMAGE
    if path is not None:
        rgb, name = decode_image(path.read_bytes()).rgb, path.name
    else:
        from skimage import data

        rgb, name = np.ascontiguousarray(data.astronaut()), "skimage astronaut"
    size_wh = SIZE_12MP_WH if rgb.shape[0] >= rgb.shape[1] else SIZE_12MP_WH[::-1]
    return cv2.resize(rgb, size_wh, interpolation=cv2.INTER_CUBIC), name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--spec", default="cn-1inch")
    parser.add_argument("--format", default="jpeg", choices=["jpeg", "png"])
    parser.add_argument("--image", type=Path, default=None)
    parser.add_argument("--models-dir", type=Path, default=REPO_ROOT / "models" / "mediapipe")
    args = parser.parse_args()

    cv2.setNumThreads(1)
    rgb, name = load_portrait(args.image)
    analyzer = FaceAnalyzerEngine(args.models_dir, FaceAnalysisConfig(num_threads=1))
    matter = PortraitMatter(args.models_dir, num_threads=1)
    params = parse_params({"spec": args.spec, "format": args.format})

    detect_ms: list[float] = []
    stages: dict[str, list[float]] = {}
    faces = analyzer.analyze(rgb)
    make_id_photo(rgb, faces, matter, params)  # warm-up: interpreters, caches
    for _ in range(args.repeats):
        start = time.perf_counter()
        faces = analyzer.analyze(rgb)
        detect_ms.append((time.perf_counter() - start) * 1000.0)
        outcome = make_id_photo(rgb, faces, matter, params)
        for stage, value in outcome.timings_ms.items():
            stages.setdefault(stage, []).append(value)
    result = {
        "image": f"{name} upscaled to {rgb.shape[1]}x{rgb.shape[0]}",
        "spec": args.spec,
        "format": args.format,
        "repeats": args.repeats,
        "threads": 1,
        "face_detection_ms": round(statistics.median(detect_ms), 2),
        "pipeline_median_ms": {stage: round(statistics.median(v), 2) for stage, v in stages.items()},
        "pipeline_p90_total_ms": round(sorted(stages["total_ms"])[int(0.9 * (len(stages["total_ms"]) - 1))], 2),
        "verdict": outcome.report.verdict,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
