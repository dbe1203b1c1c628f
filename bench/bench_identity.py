"""The identity judge on real photos: is one person still judged the same through what photos go through, and are
two people told apart (docs/BENCHMARKS.md "Identity judge").

Every face (eye distance >= 20 px) of every photo in ``../shared/eval`` is a person; each goes through JPEG q30, a
Gaussian blur (sigma 2), half size, a mirror, ±10° rotation and grayscale; the face found nearest the original's
landmarks in each variant is judged against the original. Different people: every pair of distinct faces. The
judge is the service's (``IdentityPredictor``), the faces our analyzer's (``ANALYZE_FACES``), in this process.

    python bench/bench_identity.py --eval-dir ../shared/eval [--judge dlib|sface]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.settings import get_model_settings  # noqa: E402
from deployments.faces.types import ANALYZE_FACES  # noqa: E402
from deployments.identity.predictor import IdentityPredictor, JudgeOptions  # noqa: E402
from deployments.identity.verdict import compare  # noqa: E402
from serve_app.jobs.identity import photo_face  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402

MIN_EYE_DISTANCE_PX = 20


def variants(rgb: np.ndarray) -> dict[str, np.ndarray]:
    height, width = rgb.shape[:2]
    ok, encoded = cv2.imencode(".jpg", rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 30])
    gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
    found = {
        "jpeg30": cv2.imdecode(encoded, cv2.IMREAD_COLOR)[:, :, ::-1],
        "blur": cv2.GaussianBlur(rgb, (0, 0), 2.0),
        "half": cv2.resize(rgb, (width // 2, height // 2), interpolation=cv2.INTER_AREA),
        "mirror": rgb[:, ::-1],
        "gray": np.repeat(gray[:, :, None], 3, axis=2),
    }
    for angle in (10, -10):
        matrix = cv2.getRotationMatrix2D((width / 2, height / 2), angle, 1.0)
        found[f"rotate{angle:+d}"] = cv2.warpAffine(rgb, matrix, (width, height), borderMode=cv2.BORDER_REFLECT)
    return {name: np.ascontiguousarray(image) for name, image in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-dir", type=Path, default=REPO_ROOT.parent / "shared" / "eval")
    parser.add_argument("--judge", default="auto", choices=("auto", "dlib", "sface"))
    args = parser.parse_args()
    store = get_model_settings().open_model_store()
    backend = in_process_backend(store)
    judge = IdentityPredictor(store, JudgeOptions(args.judge))

    def faces_of(rgb: np.ndarray) -> list:
        return asyncio.run(backend.call(ANALYZE_FACES, rgb))

    def embed(rgb: np.ndarray, face) -> object:
        return judge.embed([photo_face(rgb, face)])[0]

    people, seconds = {}, []
    for path in sorted(args.eval_dir.glob("*/*")):
        rgb = np.ascontiguousarray(np.asarray(Image.open(path).convert("RGB")))
        for index, face in enumerate(faces_of(rgb)):
            if face.eye_distance_px >= MIN_EYE_DISTANCE_PX:
                started = time.perf_counter()
                people[f"{path.name}#{index}"] = (rgb, face, embed(rgb, face))
                seconds.append(time.perf_counter() - started)
    same, missed = [], []
    for name, (rgb, _face, embedding) in people.items():
        for variant, image in variants(rgb).items():
            found = faces_of(image)
            if not found:
                missed.append(f"{name}/{variant}")
                continue
            best = max((compare(embed(image, other), embedding) for other in found), key=lambda i: i.similarity)
            same.append((name, variant, best))
    different = [(a, b, compare(people[a][2], people[b][2])) for a, b in itertools.combinations(people, 2)]
    judged_same = sum(identity.same_person for *_, identity in same)
    told_apart = sum(not identity.same_person for *_, identity in different)
    report = {
        "judge": judge.judge.to_json(),
        "people": len(people),
        "same_person_variants": len(same) + len(missed),
        "judged_same": judged_same,
        "no_face_found_in_variant": missed,
        "same_share": round(judged_same / max(len(same) + len(missed), 1), 4),
        "different_pairs": len(different),
        "told_apart": told_apart,
        "different_share": round(told_apart / max(len(different), 1), 4),
        "lowest_same": sorted((round(i.similarity, 3), f"{n}/{v}") for n, v, i in same)[:5],
        "highest_different": sorted(((round(i.similarity, 3), f"{a} vs {b}") for a, b, i in different), reverse=True)[
            :5
        ],
        "embed_ms_per_face_median": round(statistics.median(seconds) * 1000, 1),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
