"""The background upscaler a replica holds: Real-ESRGAN by factor, tiles grouped into batches, Lanczos left to the
job when no weights are present; and the restore job's background path through it."""

from __future__ import annotations

import asyncio
import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from deployments.common.params import parse_params
from deployments.common.weights import ModelStore, load_manifest, sha256_of
from deployments.restore.params import RestoreParams
from deployments.restore.realesrgan import RrdbConfig, build_realesrgan, upscale_image_realesrgan
from deployments.restore.tiles import paste_tile, realesrgan_multiple_px, split_tiles
from deployments.restore.types import BACKGROUND_ENGINE, BACKGROUND_UPSCALER, TileToUpscale
from deployments.restore.upscaler import UpscalePredictor, UpscalerOptions
from serve_app.jobs.restore import upscale_background
from serve_app.local_backend import in_process_backend
from tests.conftest import REPO_ROOT

TINY = {"num_feat": 8, "num_block": 1, "num_grow_ch": 4}


def store_with(tmp_path: Path, mediapipe_dir: Path, scales: tuple[int, ...]) -> ModelStore:
    """A model store with the built-in models and tiny random Real-ESRGAN checkpoints for ``scales`` (pinned in a
    copy of the manifest)."""
    for builtin in mediapipe_dir.parent.iterdir():  # mediapipe/, modnet/...: what `portrait models pull --builtin` put
        if builtin.is_dir() and builtin.name != "realesrgan":
            (tmp_path / builtin.name).symlink_to(builtin, target_is_directory=True)
    return with_tiny_realesrgan(tmp_path, scales)


def with_tiny_realesrgan(root: Path, scales: tuple[int, ...]) -> ModelStore:
    """The store at ``root`` with tiny random official-layout checkpoints for ``scales``, pinned in a manifest copy."""
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    torch.manual_seed(0)
    for scale in scales:
        spec = manifest[f"realesrgan-x{scale}plus"]
        path = root / spec.file
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"params_ema": build_realesrgan(RrdbConfig(scale=scale, **TINY)).state_dict()}, path)
        manifest[spec.name] = dataclasses.replace(spec, sha256=sha256_of(path), size_bytes=path.stat().st_size)
    return ModelStore(root, manifest)


@pytest.fixture
def photo(astronaut_rgb) -> np.ndarray:
    return np.ascontiguousarray(astronaut_rgb[100:190, 150:253])  # 90x103: odd sides, smaller than a tile


def test_without_weights_no_engine_is_offered(tmp_path, mediapipe_dir):
    engine = UpscalePredictor(store_with(tmp_path, mediapipe_dir, ()))
    assert (engine.engine_for(2), engine.engine_for(4)) == (None, None)


@pytest.mark.parametrize("scale", [2, 4])
def test_tiles_through_the_engine_equal_the_in_process_tiled_upscale(tmp_path, mediapipe_dir, photo, scale):
    store = store_with(tmp_path, mediapipe_dir, (2, 4))
    engine = UpscalePredictor(store, UpscalerOptions(device="cpu"))
    assert engine.engine_for(scale).info.weights == f"realesrgan-x{scale}plus"
    tiles = split_tiles(photo, tile_px=48, overlap_px=8, multiple_px=realesrgan_multiple_px(scale))
    upscaled = engine.upscale([TileToUpscale(tile.pixels, scale) for tile in tiles])
    model = engine._model_for(scale)[0]
    expected = upscale_image_realesrgan(model, photo, tile_px=48, overlap_px=8)
    merged = np.empty_like(expected)
    for tile, done in zip(tiles, upscaled):
        paste_tile(merged, tile, done.pixels, scale)
    assert np.array_equal(merged, expected)


def test_x2_without_its_model_runs_x4_and_brings_it_down(tmp_path, mediapipe_dir, photo):
    engine = UpscalePredictor(store_with(tmp_path, mediapipe_dir, (4,)), UpscalerOptions(device="cpu"))
    assert engine.engine_for(2).info.weights == "realesrgan-x4plus"
    (tile,) = split_tiles(photo, tile_px=128, overlap_px=4)
    (done,) = engine.upscale([TileToUpscale(tile.pixels, 2)])
    assert done.pixels.shape == (tile.pixels.shape[0] * 2, tile.pixels.shape[1] * 2, 3)


def test_a_mixed_batch_keeps_its_order(tmp_path, mediapipe_dir, photo):
    engine = UpscalePredictor(store_with(tmp_path, mediapipe_dir, (2, 4)), UpscalerOptions(device="cpu"))
    small, large = photo[:40, :40].copy(), photo[:64, :64].copy()
    jobs = [TileToUpscale(small, 4), TileToUpscale(large, 2), TileToUpscale(small, 2), TileToUpscale(large, 4)]
    shapes = [done.pixels.shape[:2] for done in engine.upscale(jobs)]
    assert shapes == [(160, 160), (128, 128), (80, 80), (256, 256)]


def test_the_restore_job_upscales_the_background_with_realesrgan_or_lanczos(tmp_path, mediapipe_dir, photo):
    backend = in_process_backend(store_with(tmp_path, mediapipe_dir, (2,)))
    neural, engine = asyncio.run(upscale_background(backend, photo, parse_params(RestoreParams, {"upscale": "2"})))
    assert engine.weights == "realesrgan-x2plus" and neural.shape == (180, 206, 3)
    declined = parse_params(RestoreParams, {"upscale": "2", "bg_upsampler": "lanczos"})
    lanczos, none = asyncio.run(upscale_background(backend, photo, declined))
    assert none is None and lanczos.shape == (180, 206, 3) and not np.array_equal(lanczos, neural)
    no_x4 = parse_params(RestoreParams, {"upscale": "4"})
    assert asyncio.run(upscale_background(backend, photo, no_x4))[1] is None  # x4 needs x4plus: Lanczos


def test_fidelity_belongs_to_codeformer():
    assert parse_params(RestoreParams, {"model": "codeformer", "fidelity": "0.7"}).fidelity_for("codeformer") == 0.7
    assert parse_params(RestoreParams, {}).fidelity_for("codeformer") == 0.5
    with pytest.raises(Exception, match="fidelity applies to model codeformer only"):
        parse_params(RestoreParams, {"model": "gfpgan-v1.4", "fidelity": "0.7"})


def test_a_photo_above_the_replicas_limit_keeps_lanczos(tmp_path, mediapipe_dir, photo):
    store = store_with(tmp_path, mediapipe_dir, (2,))
    params = parse_params(RestoreParams, {"upscale": "2"})

    def upscaled_by(max_input_megapixels: float):
        options = {BACKGROUND_UPSCALER: {"device": "cpu", "max_input_megapixels": max_input_megapixels}}
        return asyncio.run(upscale_background(in_process_backend(store, options=options), photo, params))[1]

    assert upscaled_by(0.009) is None  # 90x103 = 0.0093 MP
    assert upscaled_by(0.01).weights == "realesrgan-x2plus"


def test_the_builtin_realesrgan_upscales_the_background_of_a_restore_request(realesrgan_builtin_store, photo):
    from fastapi.testclient import TestClient

    from deployments.common.image import encode_image
    from serve_app.routes import create_api
    from serve_app.settings import Settings

    store = ModelStore(realesrgan_builtin_store, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    app = create_api()
    app.state.backend = in_process_backend(store)  # its CPU limit (0.25 MP) takes this 32x28 photo: one 52 px tile
    app.state.settings = Settings(model_store=str(realesrgan_builtin_store))
    image = encode_image(np.ascontiguousarray(photo[:32, :28]), "png")
    answer = TestClient(app).post("/v1/restore", files={"image": ("p.png", image, "image/png")}, data={"upscale": "2"})
    assert answer.status_code == 200, answer.text
    sha256 = store.status("realesrgan-x4plus-ncnn").sha256
    label = "RealESRGAN_x4plus, fp16-rounded, from the authors' ncnn release"
    assert answer.headers["X-Portrait-Engine"] == "realesrgan"
    assert answer.headers["X-Portrait-Weights"] == f'realesrgan-x4plus-ncnn@{sha256[:12]};label="{label}"'
    assert Image.open(io.BytesIO(answer.content)).size == (56, 64)
    health = asyncio.run(app.state.backend.call(BACKGROUND_ENGINE, 2)).info.to_json()  # what /healthz shows per scale
    assert (health["weights"], health["weights_label"], health["weights_state"]) == (
        "realesrgan-x4plus-ncnn",
        label,
        "present",
    )


def test_an_official_pth_when_pulled_wins_over_the_converted_builtin(tmp_path, realesrgan_builtin_store):
    for item in realesrgan_builtin_store.rglob("*"):  # the built-ins, the converted Real-ESRGAN among them
        if item.is_file():
            link = tmp_path / item.relative_to(realesrgan_builtin_store)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(item)
    official = with_tiny_realesrgan(tmp_path, (4,))  # as if `portrait models pull realesrgan-x4plus` had run

    engine = UpscalePredictor(official, UpscalerOptions(device="cpu"))

    assert official.status("realesrgan-x4plus-ncnn").state.value == "present"
    assert engine.engine_for(4).info.weights == engine.engine_for(2).info.weights == "realesrgan-x4plus"
