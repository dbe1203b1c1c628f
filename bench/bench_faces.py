"""Face-analysis throughput on one core: a 1-face 512 portrait and a 4-face 1080p photo.

    .venv/bin/python bench/bench_faces.py --threads 1

MTCNN (the small-face pass of large group photos) is loaded from ``mtcnn/`` beside ``--models-dir`` when present.

The 1080p photo is built from ../shared/eval/faces crops when present (else astronaut copies): four faces of
different sizes on a smooth background, so the run needs no network and no private data.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.faces.analyze import FaceAnalysisConfig, FaceAnalysisPredictor  # noqa: E402

logger = logging.getLogger("bench_faces")


def astronaut() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut())


def four_face_1080p(portrait: np.ndarray) -> np.ndarray:
    """1920x1080: four faces (box about 130–260 px) on a smooth background."""
    faces_dir = REPO_ROOT.parent / "shared" / "eval" / "faces"
    crops = [cv2.cvtColor(cv2.imread(str(p)), cv2.COLOR_BGR2RGB) for p in sorted(faces_dir.glob("*.png"))[:4]]
    if len(crops) < 4:
        crops = [portrait] * 4
    rng = np.random.default_rng(0)
    noise = rng.integers(60, 200, size=(18, 32, 3), dtype=np.uint8)
    photo = cv2.resize(noise, (1920, 1080), interpolation=cv2.INTER_CUBIC)
    for crop, side, x0 in zip(crops, (520, 440, 360, 300), (60, 560, 1060, 1480)):
        photo[200 : 200 + side, x0 : x0 + side] = cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA)
    return photo


def measure(engine: FaceAnalysisPredictor, image: np.ndarray, seconds: float) -> tuple[int, float, int]:
    faces = len(engine.analyze(image))  # warm-up: interpreters are built on first use
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or runs < 3:
        engine.analyze(image)
        runs += 1
    return runs, (time.perf_counter() - start) / runs, faces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-dir", type=Path, default=REPO_ROOT / "models" / "mediapipe")
    parser.add_argument("--threads", type=int, default=1, help="LiteRT threads per interpreter (1 = one core)")
    parser.add_argument("--seconds", type=float, default=3.0, help="time spent per case")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cv2.setNumThreads(args.threads)
    torch.set_num_threads(args.threads)
    mtcnn_dir = args.models_dir.parent / "mtcnn"
    config = FaceAnalysisConfig(num_threads=args.threads)
    engine = FaceAnalysisPredictor(args.models_dir, config, mtcnn_dir=mtcnn_dir if mtcnn_dir.is_dir() else None)
    portrait = astronaut()
    cases = [("astronaut 512x512", portrait), ("4 faces 1920x1080", four_face_1080p(portrait))]
    rows = ["| case | faces | ms/image | images/s | faces/s |", "|---|---|---|---|---|"]
    for name, image in cases:
        runs, seconds_per_image, faces = measure(engine, image, args.seconds)
        rows.append(
            f"| {name} | {faces} | {seconds_per_image * 1000:.1f} | {1 / seconds_per_image:.1f} "
            f"| {faces / seconds_per_image:.1f} |"
        )
    logger.info("command: %s", shlex.join([Path(sys.executable).name, *sys.argv]))
    logger.info("\n".join(rows))


if __name__ == "__main__":
    main()
