"""Framing on synthetic heads with known crown and chin lands inside the spec's ranges."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from idphoto_samples import draw_portrait

from deployments.common.affine import eye_roll_deg
from deployments.idphoto.geometry import find_crown_y, plan_framing, warp_to_output
from deployments.idphoto.report import measure_crown_y


@pytest.mark.parametrize("slug", ["cn-1inch", "us-passport", "icao-35x45", "ca-passport", "cn-id-card"])
def test_head_and_margin_land_inside_ranges(portrait, specs, slug):
    spec = specs[slug]
    framing = plan_framing(portrait.face, portrait.low_matte(), spec)
    _, height = framing.size_wh
    chin_y = framing.chin_out[1]
    crown_y = float(framing.affine[1, 1] * portrait.crown_y + framing.affine[1, 0] * 600 + framing.affine[1, 2])
    # Crown is found on a 256 px matte: within 1 % of the output height of the true crown.
    assert abs(crown_y - framing.crown_out[1]) < 0.01 * height
    assert spec.head_height[0] <= (chin_y - crown_y) / height <= spec.head_height[1]
    assert spec.top_margin[0] <= crown_y / height <= spec.top_margin[1]
    assert abs(framing.eyes_out[:, 0].mean() - framing.size_wh[0] / 2) < 0.02 * framing.size_wh[0]
    assert framing.padding["total"] == 0.0
    assert not framing.rotated and not framing.crown_clipped


def test_tilted_head_is_levelled(specs):
    tilted = draw_portrait(roll_deg=8.0)
    assert eye_roll_deg(*tilted.face.landmarks[:2]) == pytest.approx(8.0, abs=0.01)
    framing = plan_framing(tilted.face, tilted.low_matte(), specs["cn-1inch"])
    assert framing.rotated and framing.roll_in_deg == pytest.approx(8.0, abs=0.01)
    assert eye_roll_deg(*framing.eyes_out) == pytest.approx(0.0, abs=0.01)
    crop = warp_to_output(tilted.rgb, framing.affine, framing.size_wh)
    alpha = tilted.low_matte().warp_to(framing.affine, framing.size_wh)
    crown, _ = measure_crown_y(alpha, framing.size_wh[0] / 2, float(framing.eyes_out[:, 1].mean()), 120)
    assert crop.shape == (413, 295, 3)
    head = (framing.chin_out[1] - crown) / 413
    assert 0.55 <= head <= 0.70


def test_small_tilt_is_left_alone(specs):
    slight = draw_portrait(roll_deg=0.6)
    framing = plan_framing(slight.face, slight.low_matte(), specs["cn-1inch"])
    assert not framing.rotated


def test_head_cut_by_frame_top_is_detected(specs):
    cut = draw_portrait(centre_xy=(600.0, 180.0))
    crown_y, found, clipped = find_crown_y(cut.low_matte(), np.array([[1.0, 0, 0], [0, 1.0, 0]]), 600.0, 160.0, 340.0)
    assert found and clipped and crown_y < 2.0
    framing = plan_framing(cut.face, cut.low_matte(), specs["cn-1inch"])
    assert framing.crown_clipped


def test_tight_frame_needs_padding_or_upsampling(specs):
    small = draw_portrait(width_px=160, height_px=240, centre_xy=(80.0, 110.0), head_axes_px=(60.0, 80.0))
    framing = plan_framing(small.face, small.low_matte(), specs["cn-2inch"])
    assert framing.upsampled and framing.scale > 1.5
    assert framing.padding["total"] > 0.0


def test_warp_area_prefilter_matches_plain_warp_geometry(portrait, specs):
    """The integer pre-reduction must not shift the image: compare with a direct warp on a blurred source."""
    spec = specs["cn-cet"]
    framing = plan_framing(portrait.face, portrait.low_matte(), spec)
    assert framing.scale < 0.5
    mask_rgb = np.dstack([portrait.mask] * 3)
    reduced = warp_to_output(mask_rgb, framing.affine, framing.size_wh)[..., 0]
    direct = cv2.warpAffine(mask_rgb, framing.affine, framing.size_wh, flags=cv2.INTER_LINEAR)[..., 0]
    assert reduced.shape == (192, 144)
    assert np.abs(reduced.astype(int) - direct.astype(int)).mean() < 2.0
