"""Faces restored before or after colorizing? Where each order takes the faces' colours from, measured.

On gray photos (scikit-image's astronaut, plus ``../shared/eval/whole`` photos when present, made gray), with the
restorers this machine can run: the classic one, and CodeFormer's official architecture (random weights in the
released layout; its official gray rule is active, so a gray photo's faces come back gray). DDColor-T has random
weights too, scaled to colour strongly. Two orders:

- ``restore → colorize`` (what ``restore colorize=…`` does): the restore job, then DDColor on the finished photo;
- ``colorize → restore``: DDColor on the photo, then the restore job on the colour photo.

Per order and restorer: inside the detected face boxes, the mean CIELAB ``|Δab|`` between the result and DDColor's
colouring of the result's own lightness (0: every colour comes from the colorizer, one source for the whole photo;
more: the restorer painted colours of its own into the faces, which meet DDColor's at the paste edge), the mean
``|ΔL|`` to the restored photo's lightness, and the wall time of the whole job. Random weights make the colours
meaningless; where each order's colours come from is what is measured.

    .venv/bin/python bench/bench_colorize_order.py [--eval ../shared/eval]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from skimage import data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.colorize.ddcolor import build_ddcolor  # noqa: E402
from deployments.colorize.pipeline import gray_input, join_color  # noqa: E402
from deployments.colorize.types import PhotoToColorize  # noqa: E402
from deployments.common.image import decode_image, encode_image  # noqa: E402
from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.restore.codeformer import build_codeformer  # noqa: E402
from serve_app.backend import Backend  # noqa: E402
from serve_app.jobs import job_context, parse_job_params, run_job  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.settings import Settings  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
EVAL = REPO_ROOT.parent / "shared" / "eval"
COLORIZER = "ddcolor_paper_tiny"


def strong_ddcolor_state() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = build_ddcolor("tiny")
    with torch.no_grad():
        model.decoder.color_decoder.color_embed.layers[2].weight.mul_(100.0)
        model.decoder.color_decoder.color_embed.layers[2].bias.mul_(100.0)
    return model.state_dict()


def make_store(root: Path) -> ModelStore:
    """The built-ins of ./models, a random DDColor-T and a random CodeFormer, each in its released layout (their
    manifest pins made void: these are not the released bytes)."""
    manifest = load_manifest(Settings().models_manifest)
    for name in (COLORIZER, "codeformer"):
        manifest[name] = dataclasses.replace(manifest[name], sha256=None, size_bytes=None)
    shutil.copytree(REPO_ROOT / "models", root, symlinks=True)
    for name, content in (
        (COLORIZER, {"params": strong_ddcolor_state()}),
        ("codeformer", {"params_ema": build_codeformer().state_dict()}),
    ):
        path = root / manifest[name].file
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(content, path)
    return ModelStore(root, manifest)


def gray_photos(eval_dir: Path) -> dict[str, np.ndarray]:
    photos = {"astronaut": data.astronaut()}
    for path in sorted((eval_dir / "whole").glob("*")) if eval_dir.is_dir() else []:
        photos[path.stem] = decode_image(path.read_bytes()).rgb
    return {name: cv2.cvtColor(cv2.cvtColor(p, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB) for name, p in photos.items()}


async def restore(backend: Backend, rgb: np.ndarray, model: str, colorize: str) -> np.ndarray:
    context = job_context(Settings())
    params = parse_job_params("restore", {"model": model, "colorize": colorize, "format": "png"}, context)
    result = await run_job(backend, "restore", encode_image(rgb, "png"), params, context)
    return decode_image(result.body).rgb


async def colorize(backend: Backend, rgb: np.ndarray) -> np.ndarray:
    predicted = await backend.colorize(PhotoToColorize(gray_input(rgb), COLORIZER))
    return join_color(rgb, predicted.ab)


def lab(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(rgb.astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)


async def measure(backend: Backend, name: str, photo: np.ndarray, model: str) -> list[str]:
    boxes = [face.box for face in await backend.analyze_faces(photo)]
    restored_gray = await restore(backend, photo, model, "false")
    start = time.perf_counter()
    first = await restore(backend, photo, model, "true")
    restore_first_s = time.perf_counter() - start
    start = time.perf_counter()
    second = await restore(backend, await colorize(backend, photo), model, "false")
    colorize_first_s = time.perf_counter() - start
    rows = []
    for order, result, seconds in (
        ("restore → colorize", first, restore_first_s),
        ("colorize → restore", second, colorize_first_s),
    ):
        own = lab(await colorize(backend, result))  # DDColor's colours for this result's own lightness
        got, reference_l = lab(result), lab(restored_gray)[..., 0]
        ab_diffs, l_diffs = [], []
        for x1, y1, x2, y2 in (np.round(box).astype(int) for box in boxes):
            region = np.s_[max(y1, 0) : y2, max(x1, 0) : x2]
            ab_diffs.append(np.linalg.norm(got[region][..., 1:] - own[region][..., 1:], axis=-1).mean())
            l_diffs.append(np.abs(got[region][..., 0] - reference_l[region]).mean())
        rows.append(
            f"| {name} | {len(boxes)} | {model} | {order} | {np.mean(ab_diffs):.2f} | {np.mean(l_diffs):.2f} "
            f"| {seconds:.1f} |"
        )
    return rows


async def main_async(eval_dir: Path, restorers: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="colorize_order_") as tmp:
        backend = in_process_backend(make_store(Path(tmp) / "models"), restore_models=("gfpgan-v1.4", "codeformer"))
        print("| photo | faces | restorer | order | face mean Δab vs DDColor | face mean ΔL vs restored | s |")
        print("|---|---|---|---|---|---|---|")
        for name, photo in gray_photos(eval_dir).items():
            for model in restorers:
                for row in await measure(backend, name, photo, model):
                    print(row.replace("gfpgan-v1.4", "classic"), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval", type=Path, default=EVAL, help="folder with whole/ photos, if any")
    parser.add_argument(
        "--restorers", default="gfpgan-v1.4,codeformer", help="GFPGAN's weights are absent: it runs the classic one"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    asyncio.run(main_async(args.eval, args.restorers.split(",")))


if __name__ == "__main__":
    main()
