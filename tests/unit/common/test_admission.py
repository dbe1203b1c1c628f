"""The one admission rule for pixels (``deployments.common.admission``): each job's output and each model stage's
input has a cap, checked from the params and the image header before any work, refused with a code naming it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import yaml

from deployments.cartoon.compose import prepare_background
from deployments.common.admission import (
    CARTOON_OUTPUT,
    DCTNET_INPUT,
    IDPHOTO_OUTPUT,
    RESTORE_OUTPUT,
    PixelCap,
    restore_input_cap,
)
from deployments.common.errors import ImageTooManyPixels, InvalidParameter
from deployments.common.image import encode_image
from deployments.idphoto.specs import default_specs
from serve_app.hivision_wire import CropForm, IdPhotoForm, LayoutForm, parse_form
from serve_app.jobs import JobContext, Limits, job_context, parse_job_params, run_job
from serve_app.jobs.context import decode_upload
from serve_app.settings import Settings
from tests.conftest import REPO_ROOT


class NoModelStage:
    """A backend whose every model stage fails the test (a refused request must not reach one); it counts outcomes."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        self.outcomes.append(outcome)

    def __getattr__(self, name):
        raise AssertionError(f"the request reached {name} before its admission check")


@pytest.fixture(scope="module")
def job_ctx() -> JobContext:
    return job_context(Settings())


def png_of(width_px: int, height_px: int) -> bytes:
    return encode_image(np.zeros((height_px, width_px, 3), np.uint8), "png")


# Row 1: an ID photo's output size comes from its params and is capped there.


@pytest.mark.parametrize(
    "fields",
    [
        {"width_mm": "300", "height_mm": "300", "dpi": "1200"},  # 14173 x 14173 = 200 MP before the cap
        {"width_px": "4000", "height_px": "4000"},
        {"width_mm": "200", "height_mm": "250", "dpi": "600"},
    ],
)
def test_an_id_photo_size_over_the_output_cap_is_a_422_naming_the_cap(fields, job_ctx):
    with pytest.raises(InvalidParameter) as refused:
        parse_job_params("idphoto", fields, job_ctx)
    assert refused.value.http_status == 422
    assert f"over the cap of {IDPHOTO_OUTPUT.max_pixels} (4 MP)" in refused.value.message


@pytest.mark.parametrize("form", [LayoutForm, IdPhotoForm, CropForm])
def test_hivision_sizes_over_the_id_photo_output_cap_are_a_422_naming_the_cap(form):
    """The HivisionIDPhotos routes take sizes up to 4000 px a side: the same cap as our own ID photo applies."""
    with pytest.raises(InvalidParameter, match=r"an ID photo of 4000x4000 = 16000000 pixels is over the cap"):
        parse_form(form, {"width": "4000", "height": "4000"})
    assert parse_form(form, {"width": "1000", "height": "4000"})[0].width == 1000


def test_every_id_photo_preset_and_a_generous_custom_size_fit_the_cap(job_ctx):
    for spec in default_specs().values():
        assert IDPHOTO_OUTPUT.problem(spec.width_px, spec.height_px) is None, spec.slug
    params = parse_job_params("idphoto", {"width_mm": "100", "height_mm": "150", "dpi": "300"}, job_ctx)
    assert params.resolve_spec().width_px * params.resolve_spec().height_px <= IDPHOTO_OUTPUT.max_pixels


# Row 8: DCT-Net never sees more than 720 x 2048, however long the photo.


@pytest.mark.parametrize("height_px, width_px", [(720, 20000), (20000, 720), (3, 50000)])
def test_dctnet_input_is_bounded_on_both_sides_for_a_long_strip(height_px, width_px):
    prepared = prepare_background(np.zeros((height_px, width_px, 3), np.uint8))
    padded_h, padded_w = prepared.padded.shape[:2]
    assert max(padded_h, padded_w) <= 2048 and min(padded_h, padded_w) <= 720
    DCTNET_INPUT.admit_image(prepared.padded)
    assert prepared.original_wh == (width_px, height_px)  # the cartoon still comes back at the photo's size


def test_dctnet_geometry_of_ordinary_photos_stays_the_official_one():
    assert prepare_background(np.zeros((1000, 1500, 3), np.uint8)).size_wh == (1080, 720)
    assert prepare_background(np.zeros((720, 2000, 3), np.uint8)).size_wh == (2000, 720)
    assert prepare_background(np.zeros((300, 400, 3), np.uint8)).size_wh == (400, 300)


def test_dctnet_stage_refuses_an_image_over_its_cap():
    with pytest.raises(ImageTooManyPixels, match="an image for DCT-Net of 2064x720"):
        DCTNET_INPUT.admit_image(np.zeros((720, 2064, 3), np.uint8))


# Row 9: a restore's output (input x upscale^2) is capped, checked from the header.


def test_a_restore_whose_output_would_pass_the_cap_is_a_413_from_the_header(job_ctx):
    params = parse_job_params("restore", {"upscale": "4"}, job_ctx)
    backend = NoModelStage()
    with pytest.raises(ImageTooManyPixels) as refused:
        asyncio.run(run_job(backend, "restore", png_of(2100, 2000), params, job_ctx))
    assert backend.outcomes == ["image_too_many_pixels"]
    assert refused.value.http_status == 413 and refused.value.code == "image_too_many_pixels"
    assert refused.value.message == (
        "a photo to restore at upscale 4 (the output is capped at 64000000 pixels) of 2100x2000 = 4200000 pixels "
        "is over the cap of 4000000 (4 MP)"
    )
    assert refused.value.details["max_pixels"] == RESTORE_OUTPUT.max_pixels // 16


def test_restore_input_caps_follow_the_output_cap():
    assert [restore_input_cap(k).max_pixels for k in (1, 2, 4)] == [64_000_000, 16_000_000, 4_000_000]


def test_the_tighter_of_the_decode_limit_and_the_jobs_cap_answers_and_is_named():
    limits = Limits(max_bytes=10_000_000, max_pixels=1_000_000)
    with pytest.raises(ImageTooManyPixels, match="a test image of 800x800 = 640000 pixels is over the cap of 500000"):
        asyncio.run(decode_upload(png_of(800, 800), limits, PixelCap("a test image", 500_000)))
    with pytest.raises(ImageTooManyPixels, match="a test image of 1100x1000"):
        asyncio.run(decode_upload(png_of(1100, 1000), limits, PixelCap("a test image", 500_000)))
    with pytest.raises(ImageTooManyPixels, match="the limit is 1000000"):
        asyncio.run(decode_upload(png_of(1100, 1000), limits, PixelCap("a test image", 2_000_000)))
    assert asyncio.run(decode_upload(png_of(700, 700), limits, PixelCap("a test image", 500_000))).width == 700


def test_a_cartoon_is_capped_at_its_output_size(job_ctx):
    """Its output has the photo's size: an operator raising the decode limit does not raise this cap."""
    limits = Limits(max_bytes=10**9, max_pixels=10**9)
    wide = png_of(CARTOON_OUTPUT.max_pixels // 1000 + 1, 1000)
    with pytest.raises(ImageTooManyPixels, match="a cartoon"):
        asyncio.run(decode_upload(wide, limits, CARTOON_OUTPUT))


# Row 9: every Serve config bounds the photos Real-ESRGAN takes (infra/kuberay mirrors gpu.yaml: test_configs.py).


def test_every_serve_config_bounds_the_upscalers_input():
    limits = {}
    for path in sorted((REPO_ROOT / "configs").glob("*.yaml")):
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        for application in config.get("applications", []) if isinstance(config, dict) else []:
            for deployment in application.get("deployments", []):
                if deployment["name"] == "BackgroundUpscaler":
                    limits[path.name] = deployment.get("user_config", {}).get("max_input_megapixels")
    assert set(limits) == {"cluster-cpu.yaml", "gpu.yaml", "gpu-llm.yaml", "local.yaml"}
    for name, limit in limits.items():
        assert limit is not None and limit * 1_000_000 <= restore_input_cap(2).max_pixels, name
