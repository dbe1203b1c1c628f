"""How many of #25's band faces (true box side 28–60 px) MTCNN proposes at all, before any confirmation, for a few
pyramid steps and stage thresholds, on the cluttered group photos of the tuning seeds 100–104 (one core):

    OMP_NUM_THREADS=1 python bench/bench_mtcnn_candidates.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.faces.detection import EYE_DISTANCE_PER_BOX, DetectionParams  # noqa: E402
from deployments.faces.mtcnn import BLAZEFACE_SIDE_PER_WIDTH, Mtcnn, MtcnnParams, as_blazeface_box  # noqa: E402
from tests.unit.faces.group_photos import face_sources, make_old_group_photo, match_faces  # noqa: E402

SEEDS = range(100, 105)
SETTINGS = ((0.709, 0.3), (0.85, 0.3), (0.85, 0.1))  # (pyramid scale step, threshold of all three stages)


def main() -> None:
    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    mtcnn = Mtcnn(REPO_ROOT / "models" / "mtcnn")
    sources = face_sources(REPO_ROOT.parent / "shared" / "eval")
    params = DetectionParams()
    min_side = params.min_eye_px / EYE_DISTANCE_PER_BOX / BLAZEFACE_SIDE_PER_WIDTH
    max_side = params.small_face_max_px / BLAZEFACE_SIDE_PER_WIDTH
    photos = [make_old_group_photo(sources, seed=seed) for seed in SEEDS]
    for step, threshold in SETTINGS:
        found = band_faces = candidates = 0
        for photo in photos:
            sides = np.maximum(photo.boxes[:, 2] - photo.boxes[:, 0], photo.boxes[:, 3] - photo.boxes[:, 1])
            band = (sides >= 28) & (sides <= 60)
            mtcnn_params = MtcnnParams(min_side, max_side, step, (threshold,) * 3)
            boxes = [as_blazeface_box(d).box for d in mtcnn.detect(photo.rgb, mtcnn_params)]
            result = match_faces(photo.boxes, np.array(boxes).reshape(-1, 4))
            found, band_faces, candidates = (
                found + result.found[band].sum(),
                band_faces + band.sum(),
                candidates + len(boxes),
            )
        print(
            f"scale_step {step}, thresholds {threshold}: {found}/{band_faces} band faces have a candidate "
            f"({found / band_faces:.1%}), {candidates / len(photos):.0f} candidates/photo"
        )


if __name__ == "__main__":
    main()
