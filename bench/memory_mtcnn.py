"""Peak memory MTCNN's small-face pass adds for a 50 MP photo (the ``memory_jobs.py`` photo: the astronaut's face
over flat grey, 10000x5000), ru_maxrss over a process warmed on a 1500x1500 crop; run it in a fresh process.

    OMP_NUM_THREADS=1 python bench/memory_mtcnn.py
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from skimage import data

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.faces.detection import DetectionParams  # noqa: E402
from deployments.faces.mtcnn import Mtcnn  # noqa: E402


def main() -> None:
    width, height = 10000, 5000
    photo = np.zeros((height, width, 3), np.uint8)
    photo[:] = (120, 140, 160)
    photo[:, :height] = cv2.resize(data.astronaut(), (height, height), interpolation=cv2.INTER_CUBIC)
    mtcnn = Mtcnn(REPO_ROOT / "models" / "mtcnn")
    mtcnn.detect_small_faces(photo[:1500, :1500].copy(), DetectionParams())
    baseline_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    found = mtcnn.detect_small_faces(photo, DetectionParams())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "added_mib": round(peak_mib - baseline_mib),
                "s": round(time.perf_counter() - start, 1),
                "faces": len(found),
            }
        )
    )


if __name__ == "__main__":
    main()
