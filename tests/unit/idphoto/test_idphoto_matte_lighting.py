"""Matte refinement, colour decontamination, lighting and background renders on inputs with known answers."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.affine import compose_affine, invert_affine
from deployments.idphoto.background import composite, render_background
from deployments.idphoto.lighting import MAX_GAIN_CHANGE, correct_lighting, white_balance
from deployments.idphoto.matte import (
    LowResMatte,
    estimate_foreground,
    keep_subject,
    letterbox,
    refine_matte,
)


def two_tone(width_px: int = 200, height_px: int = 160) -> tuple[np.ndarray, np.ndarray]:
    """Dark subject on the left half, light background on the right; the true edge is at x = width / 2."""
    rgb = np.full((height_px, width_px, 3), (230, 220, 60), np.uint8)
    rgb[:, : width_px // 2] = (40, 60, 120)
    truth = np.zeros((height_px, width_px), np.float32)
    truth[:, : width_px // 2] = 1.0
    return rgb, truth


def test_letterbox_maps_points_exactly():
    rgb = np.zeros((3000, 4000, 3), np.uint8)
    rgb[1000:1010, 2000:2010] = 255
    square, affine = letterbox(rgb, 256)
    assert square.shape == (256, 256, 3)
    x, y = affine @ np.array([2004.5, 1004.5, 1.0])
    assert square[int(round(y)), int(round(x))].max() > 0
    assert np.allclose(compose_affine(affine, invert_affine(affine)), np.eye(3)[:2])


def test_refine_snaps_a_blurred_matte_to_the_image_edge():
    rgb, truth = two_tone(400, 320)
    shifted = np.zeros_like(truth)
    shifted[:, : truth.shape[1] // 2 + 3] = 1.0
    coarse = cv2.GaussianBlur(shifted, (0, 0), 3)
    refined = refine_matte(coarse, rgb)
    assert np.abs(refined - truth).mean() < 0.7 * np.abs(coarse - truth).mean()
    assert refined[:, 199].min() > 0.9  # the edge itself moved back to the image edge
    assert refined.dtype == np.float32 and refined.min() >= 0.0 and refined.max() <= 1.0


def test_decontamination_removes_the_old_background_from_edges():
    rgb, truth = two_tone()
    alpha = cv2.GaussianBlur(truth, (0, 0), 2)
    observed = composite(rgb.astype(np.float32) / 255.0, alpha, np.full_like(rgb, (230, 220, 60), np.float32) / 255.0)
    foreground = estimate_foreground(observed, alpha)
    edge = (alpha > 0.2) & (alpha < 0.8)
    subject = np.array([40, 60, 120]) / 255.0
    naive_error = np.abs(observed[edge] / 255.0 - subject).mean()
    assert np.abs(foreground[edge] - subject).mean() < 0.5 * naive_error


def test_white_balance_is_clipped_and_geometry_untouched():
    rgb = np.full((120, 90, 3), (200, 150, 100), np.uint8)
    balanced = white_balance(rgb)
    gains = balanced.reshape(-1, 3).mean(0) / rgb.reshape(-1, 3).mean(0)
    assert np.all(np.abs(gains - 1.0) <= MAX_GAIN_CHANGE + 0.01)
    assert balanced[0, 0, 0] < 200 and balanced[0, 0, 2] > 100
    corrected = correct_lighting(rgb, np.ones((120, 90), bool))
    assert corrected.shape == rgb.shape and corrected.dtype == np.uint8


@pytest.mark.parametrize("render", ["solid", "vertical", "radial"])
def test_background_renders(render):
    background = render_background((98, 139, 206), (100, 140), render)
    assert background.shape == (140, 100, 3)
    top, bottom = background[0, 0], background[-1, 50]
    if render == "solid":
        assert np.allclose(background, background[0, 0])
    if render == "vertical":
        assert np.allclose(top * 255, (98, 139, 206), atol=0.5) and (bottom > top).all()
    if render == "radial":
        assert (background[int(0.35 * 139), 50] > background[0, 0]).all()
    white = render_background((255, 255, 255), (100, 140), render)
    assert np.allclose(white, 1.0)


@pytest.mark.parametrize("matting", ["modnet", "selfie"])
def test_keep_subject_drops_detached_blobs_and_keeps_soft_hair_within_reach(matting):
    alpha = np.zeros((672, 512), np.float32)
    cv2.circle(alpha, (256, 300), 120, 1.0, -1)  # the subject
    alpha[170:180, 250:262] = 0.3  # a soft strand reaching 10 px above the head
    cv2.circle(alpha, (60, 60), 30, 1.0, -1)  # a lamp, detached
    low = LowResMatte(alpha, np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), alpha.shape, matting)
    kept = keep_subject(low, [(256.0, 300.0)], 200.0).alpha
    assert kept[300, 256] == pytest.approx(1.0) and kept[60, 60] == 0.0
    if matting == "modnet":  # MODNet's soft hair reaches further: 2 % of the canvas (13 px here) is kept
        assert kept[172, 256] == pytest.approx(0.3, abs=0.01)
    else:  # the selfie model's haze beyond 2 px of its core is dropped
        assert kept[172, 256] < 0.01


def test_keep_subject_keeps_a_thin_neck_the_body_and_the_ears_and_drops_a_touching_post():
    """A head (face 200 px wide) on a neck thinner than the opening, with ears; a post touches the head's side."""
    alpha = np.zeros((672, 512), np.float32)
    cv2.circle(alpha, (256, 200), 100, 1.0, -1)  # the head
    alpha[290:400, 236:276] = 1.0  # a neck 40 px wide (the opening's disk is 0.2 x 200 = 40 px in radius)
    alpha[400:, 100:412] = 1.0  # the body
    cv2.ellipse(alpha, (152, 200), (14, 28), 0, 0, 360, 1.0, -1)  # an ear
    alpha[0:360, 352:392] = 1.0  # a door post touching the head's right side
    low = LowResMatte(alpha, np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), alpha.shape, "modnet")
    kept = keep_subject(low, [(256.0, 200.0), (256.0, 420.0)], 200.0).alpha
    assert kept[200, 256] == pytest.approx(1.0) and kept[600, 256] == pytest.approx(1.0)  # head and body
    assert kept[340, 256] == pytest.approx(1.0) and kept[200, 142] == pytest.approx(1.0)  # neck and ear
    assert kept[20, 372] == 0.0 and kept[330, 372] == 0.0  # the post above and below the contact
