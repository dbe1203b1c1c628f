"""The shared 2x3 affine helpers: values worked out by hand, and agreement with what OpenCV does with the maps."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from deployments.common.affine import (
    apply_affine,
    compose_affine,
    eye_roll_deg,
    invert_affine,
    pixel_scale_affine,
)

# Rotate by 90° counter-clockwise on screen (x' = y, y' = -x), scale 2, then move by (10, 20).
ROTATE_SCALE_MOVE = np.array([[0.0, 2.0, 10.0], [-2.0, 0.0, 20.0]])


def test_apply_maps_points_by_hand():
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    np.testing.assert_array_equal(apply_affine(ROTATE_SCALE_MOVE, points), [[10.0, 20.0], [10.0, 18.0], [16.0, 20.0]])


def test_invert_undoes_the_map():
    np.testing.assert_allclose(invert_affine(ROTATE_SCALE_MOVE), [[0.0, -0.5, 10.0], [0.5, 0.0, -5.0]])
    points = np.random.default_rng(0).uniform(-50, 50, (7, 2))
    back = apply_affine(invert_affine(ROTATE_SCALE_MOVE), apply_affine(ROTATE_SCALE_MOVE, points))
    np.testing.assert_allclose(back, points, atol=1e-12)
    assert invert_affine(ROTATE_SCALE_MOVE.astype(np.float32)).dtype == np.float64


def test_compose_applies_inner_first():
    move = np.array([[1.0, 0.0, 5.0], [0.0, 1.0, 0.0]])
    double = np.array([[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    # Move then double: (1, 1) -> (6, 1) -> (12, 2); double then move: (2, 2) -> (7, 2).
    np.testing.assert_array_equal(apply_affine(compose_affine(double, move), np.array([[1.0, 1.0]])), [[12.0, 2.0]])
    np.testing.assert_array_equal(apply_affine(compose_affine(move, double), np.array([[1.0, 1.0]])), [[7.0, 2.0]])
    np.testing.assert_allclose(compose_affine(ROTATE_SCALE_MOVE, invert_affine(ROTATE_SCALE_MOVE)), np.eye(3)[:2])


def test_pixel_scale_keeps_pixel_edges_where_a_resize_puts_them():
    # Doubling: pixel 0 covers [-0.5, 0.5], which becomes [-0.5, 1.5] with centre 0.5; the last pixel's right edge
    # (3.5 of 4 px) lands on 7.5 of 8 px.
    double = pixel_scale_affine(2.0)
    np.testing.assert_array_equal(double, [[2.0, 0.0, 0.5], [0.0, 2.0, 0.5]])
    np.testing.assert_array_equal(apply_affine(double, np.array([[0.0, 0.0], [3.5, -0.5]])), [[0.5, 0.5], [7.5, -0.5]])
    np.testing.assert_array_equal(pixel_scale_affine(0.5, 2.0, shift_xy=(3.0, -1.0)), [[0.5, 0, 2.75], [0, 2.0, -0.5]])
    np.testing.assert_allclose(invert_affine(double), pixel_scale_affine(0.5))


def test_pixel_scale_matches_what_opencv_resize_does():
    """A linear ramp resized by OpenCV equals the ramp sampled through the inverse map (away from the borders)."""
    ramp = np.tile(np.arange(40, dtype=np.float32) * 3.0, (30, 1))
    resized = cv2.resize(ramp, (100, 75), interpolation=cv2.INTER_LINEAR)
    to_source = invert_affine(pixel_scale_affine(100 / 40, 75 / 30))
    xs = apply_affine(to_source, np.stack([np.arange(100.0), np.zeros(100)], axis=1))[:, 0]
    inside = (xs >= 0) & (xs <= 39)
    np.testing.assert_allclose(resized[10, inside], 3.0 * xs[inside], atol=1e-3)


@pytest.mark.parametrize(
    ("right_eye", "expected_deg"),
    [((110.0, 50.0), 0.0), ((110.0, 60.0), 45.0), ((110.0, 40.0), -45.0), ((100.0 + 3**0.5 * 10, 60.0), 30.0)],
)
def test_eye_roll_is_positive_when_the_image_right_eye_is_lower(right_eye, expected_deg):
    assert eye_roll_deg(np.array([100.0, 50.0]), np.array(right_eye)) == pytest.approx(expected_deg, abs=1e-9)


def test_rotating_by_the_roll_levels_the_eyes():
    """The angle is the one ``cv2.getRotationMatrix2D`` takes to bring the eye line level."""
    left, right = np.array([80.0, 90.0]), np.array([140.0, 104.0])
    roll = eye_roll_deg(left, right)
    level = cv2.getRotationMatrix2D((110.0, 97.0), roll, 1.0)
    moved = apply_affine(level, np.stack([left, right]))
    assert moved[0, 1] == pytest.approx(moved[1, 1], abs=1e-9) and moved[1, 0] > moved[0, 0]
    assert eye_roll_deg(*moved) == pytest.approx(0.0, abs=1e-9)
