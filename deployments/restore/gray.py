"""Gray photos stay gray: CodeFormer's official inference on a black-and-white photo, step for step.

The network paints colour onto a gray face (a channel spread of ~170 on random weights, a tint on real ones).
``inference_codeformer.py`` therefore tests the whole input photo with ``is_gray`` (``facelib/utils/misc.py``,
threshold 10) and, when it is gray, turns each restored face gray (``bgr2gray``) and matches its per-channel mean and
standard deviation to the aligned input crop (``adain_npy``) in ``FaceRestoreHelper.add_restored_face``. The official
helper keeps that float face until the final paste; the restored faces it saves, and ours, are rounded and clipped
to uint8 as ``cv2.imwrite`` does. Numpy only: the ingress tests the photo, the restorer replica matches the faces.
"""

from __future__ import annotations

import numpy as np

from deployments.common.errors import InternalError
from deployments.common.image import require_image

GRAY_THRESHOLD = 10.0  # official ``is_gray(img, threshold=10)``: mean variance of the pairwise channel differences
ADAIN_EPS = 1e-5  # official ``calc_mean_std(feat, eps=1e-5)``, added to the variance
LUMA_WEIGHTS = (0.2989, 0.5870, 0.1140)  # official ``bgr2gray``: R, G, B


def is_gray(image_rgb: np.ndarray, threshold: float = GRAY_THRESHOLD) -> bool:
    """Whether a photo counts as black and white for the official inference: the variances of R−G, G−B and B−R
    average at most ``threshold`` (a scan of a gray print with slight colour noise still counts)."""
    require_image(image_rgb, what="gray test input")
    channels = [image_rgb[:, :, index].astype(np.int16) for index in range(3)]
    spread = sum(float((channels[k] - channels[(k + 1) % 3]).var()) for k in range(3)) / 3.0
    return spread <= threshold


def match_gray(restored_rgb: np.ndarray, input_crop_rgb: np.ndarray) -> np.ndarray:
    """The restored face made gray, then per channel shifted and scaled to the input crop's mean and standard
    deviation (the official ``adain_npy(bgr2gray(restored), cropped_face)``); both HxWx3 uint8 RGB of one size."""
    require_image(restored_rgb, what="restored face")
    require_image(input_crop_rgb, what="input crop")
    if restored_rgb.shape != input_crop_rgb.shape:
        raise InternalError(f"restored face {restored_rgb.shape} and input crop {input_crop_rgb.shape} differ in size")
    red, green, blue = (restored_rgb[:, :, index] for index in range(3))
    luma = LUMA_WEIGHTS[0] * red + LUMA_WEIGHTS[1] * green + LUMA_WEIGHTS[2] * blue  # float64, in official order
    content = np.repeat(luma[:, :, None], 3, axis=2)
    content_mean, content_std = _mean_std(content)
    style_mean, style_std = _mean_std(input_crop_rgb.astype(np.float64))
    matched = (content - content_mean) / content_std * style_std + style_mean
    return np.clip(np.round(matched), 0, 255).astype(np.uint8)


def _mean_std(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and sqrt(variance + eps) over all pixels (official ``calc_mean_std``)."""
    flat = image.reshape(-1, image.shape[2])
    return flat.mean(axis=0), np.sqrt(flat.var(axis=0) + ADAIN_EPS)
