"""Time of face detection on a photo of uniform noise, the worst case for the small-face judge (one core).

    .venv/bin/python bench/bench_noise_faces.py --width 4000 --height 3000

Noise raises the most small candidates a caller can send; the judge takes at most ``confirm.MAX_JUDGED`` of them.
Prints the candidates judged, the faces kept and the seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.faces.detect import DetectionParams, FaceDetector  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models-root", type=Path, default=REPO_ROOT / "models", help="holds mediapipe/ and mtcnn/")
    parser.add_argument("--width", type=int, default=4000)
    parser.add_argument("--height", type=int, default=3000)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    detector = FaceDetector(args.models_root / "mediapipe", mtcnn_dir=args.models_root / "mtcnn")
    judged = []
    gather = detector.judge.gather

    def counting_gather(photo, smoothed, small):
        judged.append(len(small))
        return gather(photo, smoothed, small)

    detector.judge.gather = counting_gather
    photo = np.random.default_rng(0).integers(0, 256, (args.height, args.width, 3), dtype=np.uint8)
    start = time.perf_counter()
    faces = detector.detect(photo, DetectionParams())
    print(
        f"{args.width}x{args.height} noise: {sum(judged)} candidates judged, {len(faces)} faces, "
        f"{time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()
