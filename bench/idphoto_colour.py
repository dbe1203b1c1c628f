"""Face colour kept or moved: mean CIELAB ΔE of the face between the source and the ID photo, per lighting mode.

    .venv/bin/python bench/idphoto_colour.py [--eval-dir ../shared/eval/idphoto] [--out test-output/idphoto]

Portraits: the scikit-image astronaut as it is, under a warm, a cool and a mixed (warm left, cool right) light
cast and under-exposed (dim), plus every eval portrait found (skipped when the folder is absent). For each, the
cn-1inch photo is made with ``lighting`` off, gentle (the default) and full (the former default) on a white
background; the report's ``skin_delta_e`` is printed as a Markdown table, and before/after panels (source, off,
gentle, full) are saved.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import decode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.faces.analyze import FaceAnalysisPredictor  # noqa: E402
from deployments.idphoto.params import parse_params  # noqa: E402
from deployments.idphoto.pipeline import make_id_photo  # noqa: E402
from deployments.idphoto.predictor import MattingPredictor  # noqa: E402

MODES = ("off", "gentle", "full")
# Per-channel gains of a light cast (R, G, B); "mixed" goes from warm on the left to cool on the right.
CASTS = {"warm": (1.12, 1.0, 0.78), "cool": (0.82, 0.97, 1.15), "dim": (0.42, 0.42, 0.42)}


def cast(rgb: np.ndarray, name: str) -> np.ndarray:
    """``rgb`` under a coloured light: ``neutral``, ``warm``, ``cool``, ``mixed`` or ``dim`` (under-exposed)."""
    if name == "neutral":
        return rgb
    if name == "mixed":
        ramp = np.linspace(0.0, 1.0, rgb.shape[1], dtype=np.float32)[None, :, None]
        gains = (1.0 - ramp) * np.array(CASTS["warm"]) + ramp * np.array(CASTS["cool"])
    else:
        gains = np.broadcast_to(np.array(CASTS[name], dtype=np.float32), (1, 1, 3))
    return np.clip(rgb.astype(np.float32) * gains + 0.5, 0, 255).astype(np.uint8)


def portraits(eval_dir: Path | None) -> dict[str, np.ndarray]:
    from skimage import data

    astronaut = np.ascontiguousarray(data.astronaut())
    found = {f"astronaut {name}": cast(astronaut, name) for name in ("neutral", "warm", "cool", "mixed", "dim")}
    if eval_dir is not None and eval_dir.is_dir():
        for path in sorted(eval_dir.glob("*.jpg")):
            found[path.name] = decode_image(path.read_bytes()).rgb
    return found


def measure(rgb: np.ndarray, analyzer, matter) -> tuple[dict[str, float | None], list[np.ndarray]]:
    """``skin_delta_e`` per lighting mode and the photos (PNG on white) in that order."""
    faces = analyzer.analyze(rgb)
    low = matter.segment(rgb, "modnet")
    figures, photos = {}, []
    for mode in MODES:
        params = parse_params({"format": "png", "background": "white", "lighting": mode})
        outcome = make_id_photo(rgb, faces, low, params)
        figures[mode] = outcome.report.skin_delta_e
        photos.append(np.asarray(Image.open(io.BytesIO(outcome.photo)).convert("RGB")))
    return figures, photos


def save_panels(path: Path, source: np.ndarray, photos: list[np.ndarray]) -> None:
    height = photos[0].shape[0]
    scaled = cv2.resize(source, (round(source.shape[1] * height / source.shape[0]), height), cv2.INTER_AREA)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.concatenate([scaled, *photos], axis=1)).save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-dir", type=Path, default=REPO_ROOT.parent / "shared" / "eval" / "idphoto")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "test-output" / "idphoto")
    args = parser.parse_args()
    store = ModelStore(REPO_ROOT / "models", load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    analyzer = FaceAnalysisPredictor(REPO_ROOT / "models" / "mediapipe")
    matter = MattingPredictor.from_store(store)
    print("| portrait | off | gentle (default) | full (former default) |")
    print("|---|---|---|---|")
    for name, rgb in portraits(args.eval_dir).items():
        figures, photos = measure(rgb, analyzer, matter)
        cells = " | ".join("-" if figures[m] is None else f"{figures[m]:.2f}" for m in MODES)
        print(f"| {name} | {cells} |", flush=True)
        save_panels(args.out / f"colour_{name.replace(' ', '_').replace('.jpg', '')}.png", rgb, photos)


if __name__ == "__main__":
    main()
