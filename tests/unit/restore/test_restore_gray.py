"""A gray photo's faces come back from CodeFormer gray and matched to the input crop, as the official inference does.

The expected values follow sczhou/CodeFormer ``facelib/utils/misc.py`` (``is_gray``, ``bgr2gray``, ``adain_npy``) on
BGR arrays, as ``FaceRestoreHelper.add_restored_face`` calls them; the saved face is rounded and clipped to uint8.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from PIL import Image

from deployments.common.weights import ModelSpec, ModelStore
from deployments.restore import codeformer, restorer
from deployments.restore.codeformer import load_codeformer
from deployments.restore.gray import is_gray, match_gray
from deployments.restore.types import FaceToRestore
from tests.codeformer_samples import TINY_CODEFORMER as TINY
from tests.codeformer_samples import randomized_codeformer


def official_is_gray(img: np.ndarray, threshold: float = 10) -> bool:
    image = Image.fromarray(img)
    channels = [np.asarray(image.getchannel(channel=k), dtype=np.int16) for k in range(3)]
    spread = (channels[0] - channels[1]).var() + (channels[1] - channels[2]).var() + (channels[2] - channels[0]).var()
    return bool(spread / 3.0 <= threshold)


def official_gray_face(restored_bgr: np.ndarray, input_bgr: np.ndarray) -> np.ndarray:
    """``adain_npy(bgr2gray(restored_face), cropped_face)``, then ``cv2.imwrite``'s rounding to uint8."""
    b, g, r = restored_bgr[:, :, 0], restored_bgr[:, :, 1], restored_bgr[:, :, 2]
    gray = (0.2989 * r + 0.5870 * g + 0.1140 * b)[:, :, np.newaxis].repeat(3, axis=2)

    def mean_std(feat):
        flat = feat.reshape(-1, 3)
        return flat.mean(axis=0).reshape(1, 1, 3), np.sqrt(flat.var(axis=0) + 1e-5).reshape(1, 1, 3)

    style_mean, style_std = mean_std(input_bgr)
    content_mean, content_std = mean_std(gray)
    matched = (gray - content_mean) / content_std * style_std + style_mean
    return np.clip(np.round(matched), 0, 255).astype(np.uint8)


@pytest.fixture
def gray_face(astronaut_rgb) -> np.ndarray:
    face = cv2.resize(astronaut_rgb[60:260, 150:330], (TINY.size_px, TINY.size_px), interpolation=cv2.INTER_AREA)
    gray = cv2.cvtColor(face, cv2.COLOR_RGB2GRAY).astype(np.float64)
    faded = np.round(gray * 0.4 + 70).astype(np.uint8)  # an old print's contrast: the matched face is never clipped
    return cv2.cvtColor(faded, cv2.COLOR_GRAY2RGB)


@pytest.fixture
def codeformer_predictor(tmp_path: Path, monkeypatch) -> restorer.RestorationPredictor:
    """The restorer engine serving a random-weight CodeFormer (small config) from a store, as a replica would."""
    path = tmp_path / "codeformer" / "codeformer.pth"
    path.parent.mkdir()
    torch.save({"params_ema": randomized_codeformer(TINY, seed=3).state_dict()}, path)
    spec = ModelSpec(
        name="codeformer",
        task="face_restoration",
        architecture="codeformer",
        engine="codeformer",
        file="codeformer/codeformer.pth",
        url="https://example.invalid/codeformer.pth",
        license="test",
        args={"size": TINY.size_px, "template": "ffhq-512"},
    )
    tiny = dataclasses.replace(codeformer.RESTORER, load=lambda p: load_codeformer(p, config=TINY))
    monkeypatch.setattr(codeformer, "RESTORER", tiny)  # what restorer_architecture finds for "codeformer"
    return restorer.RestorationPredictor(
        ModelStore(tmp_path, {"codeformer": spec}), restorer.RestorerOptions(), "codeformer"
    )


def test_is_gray_agrees_with_the_official_test(astronaut_rgb, gray_face):
    rng = np.random.default_rng(0)
    noisy = np.clip(gray_face.astype(int) + rng.normal(0, 2.0, gray_face.shape), 0, 255).astype(np.uint8)
    tinted = gray_face + np.array([25, 10, 0], np.uint8)  # a constant sepia tint
    for image, expected in ((gray_face, True), (noisy, True), (astronaut_rgb, False), (tinted, True)):
        assert is_gray(image) is official_is_gray(image) is expected
    very_noisy = np.clip(gray_face.astype(int) + rng.normal(0, 4.0, gray_face.shape), 0, 255).astype(np.uint8)
    assert is_gray(very_noisy) is official_is_gray(very_noisy) is False


def test_codeformer_returns_a_gray_photos_face_gray_and_matched(codeformer_predictor, gray_face):
    (colour,) = codeformer_predictor.restore([FaceToRestore(gray_face, 0.5)])
    (gray,) = codeformer_predictor.restore([FaceToRestore(gray_face, 0.5, from_gray_photo=True)])
    assert np.ptp(colour.crop.astype(int), axis=2).max() > 20  # the network paints colour onto the gray face
    assert np.ptp(gray.crop.astype(int), axis=2).max() == 0
    expected = official_gray_face(colour.crop[:, :, ::-1], gray_face[:, :, ::-1])[:, :, ::-1]
    np.testing.assert_array_equal(gray.crop, expected)
    assert abs(gray.crop.mean() - gray_face.mean()) < 0.5
    assert abs(gray.crop.std() - gray_face.std()) < 0.5


def test_match_gray_keeps_a_tinted_crops_channel_statistics(astronaut_rgb):
    crop = (cv2.resize(astronaut_rgb, (64, 64), interpolation=cv2.INTER_AREA) * 0.5 + 60).astype(np.uint8)
    restored = np.roll(crop, 7, axis=1)
    matched = match_gray(restored, crop)
    expected = official_gray_face(restored[:, :, ::-1], crop[:, :, ::-1])[:, :, ::-1]
    np.testing.assert_array_equal(matched, expected)
    np.testing.assert_allclose(matched.reshape(-1, 3).mean(axis=0), crop.reshape(-1, 3).mean(axis=0), atol=0.5)
