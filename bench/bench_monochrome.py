"""Where ``colorize: auto`` draws the line: the tone reading of colour, faded-colour, gray and toned photos.

Colour photos are scikit-image's, plus ``../shared/eval/`` photos when present. From each: a faded version (chroma
×0.3, ×0.15), gray, three toned prints (sepia by the classic matrix, a warm tint, a cyanotype blue), and each gray or
toned one again with scanner colour noise (σ 4 per channel) and as a JPEG at quality 50. Prints the reading per photo
and, per group, the range, against ``MONOCHROME_MAX_STRAY``.

    .venv/bin/python bench/bench_monochrome.py [--eval ../shared/eval]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
from skimage import data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.colorize.tone import MONOCHROME_MAX_STRAY, read_tone  # noqa: E402

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"  # ../shared/eval beside the checkout
SEPIA = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]])


def colour_photos(eval_dir: Path) -> dict[str, np.ndarray]:
    photos = {name: getattr(data, name)() for name in ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field")}
    for path in sorted(eval_dir.glob("*/*")) if eval_dir.is_dir() else []:
        image = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if image is not None:
            photos[path.stem] = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
    return {name: np.ascontiguousarray(photo[..., :3]) for name, photo in photos.items()}


def gray(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB)


def faded(factor: float) -> Callable[[np.ndarray], np.ndarray]:
    def fade(rgb: np.ndarray) -> np.ndarray:
        lab = cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)
        lab[..., 1:] *= factor
        return (cv2.cvtColor(lab, cv2.COLOR_Lab2RGB) * 255.0).round().astype(np.uint8)

    return fade


def toned(tint: tuple[float, float, float]) -> Callable[[np.ndarray], np.ndarray]:
    def tone(rgb: np.ndarray) -> np.ndarray:
        return np.clip(gray(rgb).astype(np.float32) * np.array(tint), 0, 255).astype(np.uint8)

    return tone


def sepia(rgb: np.ndarray) -> np.ndarray:
    return np.clip(gray(rgb).astype(np.float32) @ SEPIA.T, 0, 255).astype(np.uint8)


def noisy(rgb: np.ndarray) -> np.ndarray:
    noise = np.random.default_rng(0).normal(0, 4, rgb.shape)
    return np.clip(rgb + noise, 0, 255).astype(np.uint8)


def jpeg(rgb: np.ndarray) -> np.ndarray:
    _, encoded = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 50])
    return cv2.cvtColor(cv2.imdecode(encoded, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=EVAL, help="folder of evaluation photos (subfolders), if any")
    args = parser.parse_args()
    mono = {"gray": gray, "sepia": sepia, "warm tint": toned((1.0, 0.86, 0.67)), "cyanotype": toned((0.55, 0.8, 1.0))}
    groups: dict[str, list[tuple[str, float, bool]]] = {}
    for name, photo in colour_photos(args.eval).items():
        is_gray = bool(np.all(photo == gray(photo)))
        variants = {("gray (as given)" if is_gray else "colour"): photo}
        if not is_gray:
            variants |= {"faded ×0.3": faded(0.3)(photo), "faded ×0.15": faded(0.15)(photo)}
        for label, make in mono.items():
            made = make(photo)
            variants |= {label: made, f"{label} + noise": noisy(made), f"{label} + JPEG 50": jpeg(made)}
        for label, image in variants.items():
            reading = read_tone(image)
            groups.setdefault(label, []).append((name, reading.stray, reading.monochrome))
    print(f"threshold: monochrome when stray < {MONOCHROME_MAX_STRAY}\n")
    print("| group | photos | stray min | stray max | called monochrome |")
    print("|---|---|---|---|---|")
    for label, rows in groups.items():
        strays = [stray for _, stray, _ in rows]
        called = sum(monochrome for _, _, monochrome in rows)
        print(f"| {label} | {len(rows)} | {min(strays):.2f} | {max(strays):.2f} | {called}/{len(rows)} |")
    print("\nper photo (colour and faded):")
    for label in ("colour", "faded ×0.3", "faded ×0.15"):
        print(label, ", ".join(f"{name} {stray:.1f}" for name, stray, _ in groups.get(label, [])))


if __name__ == "__main__":
    main()
