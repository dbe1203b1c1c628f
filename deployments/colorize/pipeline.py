"""The official DDColor pre- and post-processing around the network, on the service's image contract.

As ``ColorizationPipeline.process`` in piddnad/DDColor ``ddcolor/pipeline.py`` does it, step for step: the photo as
float32 in [0, 1]; resized (bilinear) to ``size_px × size_px``; its Lab ``L`` alone turned back into a gray RGB image
(the network input); the predicted ``(a, b)`` resized to the photo's size (nearest) and joined with the photo's own
full-resolution ``L``; Lab → RGB by OpenCV's float conversion (which clips to [0, 1]); ×255, rounded. The official code
works in BGR and we in RGB: every step is per channel or colour-order symmetric, so the result is the same pixels.

Images are ``(H, W, 3)`` uint8 RGB (``deployments.common.image``).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np
import torch
from torch.nn import functional as F

from deployments.colorize.ddcolor import INPUT_MULTIPLE_PX, DDColor
from deployments.common.errors import InvalidParameter

DEFAULT_SIZE_PX = 512  # the official --input_size


def _unit_float(photo: np.ndarray) -> np.ndarray:
    return (photo / 255.0).astype(np.float32)  # the official rounding: float64 division, then float32


def gray_input(photo: np.ndarray, size_px: int = DEFAULT_SIZE_PX) -> np.ndarray:
    """The network input for ``photo``: ``3×size×size`` float32, the gray RGB image of its resized ``L``."""
    if size_px < INPUT_MULTIPLE_PX or size_px % INPUT_MULTIPLE_PX:
        raise InvalidParameter(f"DDColor size_px must be a positive multiple of {INPUT_MULTIPLE_PX}, got {size_px}")
    resized = cv2.resize(_unit_float(photo), (size_px, size_px))
    lightness = cv2.cvtColor(resized, cv2.COLOR_RGB2Lab)[:, :, :1]
    gray_lab = np.concatenate([lightness, np.zeros_like(lightness), np.zeros_like(lightness)], axis=-1)
    return np.ascontiguousarray(cv2.cvtColor(gray_lab, cv2.COLOR_LAB2RGB).transpose(2, 0, 1))


def join_color(photo: np.ndarray, ab: torch.Tensor) -> np.ndarray:
    """``photo``'s own ``L`` with the predicted ``ab`` (``2×s×s``, any float dtype) resized to it → uint8 RGB."""
    height, width = photo.shape[:2]
    lightness = cv2.cvtColor(_unit_float(photo), cv2.COLOR_RGB2Lab)[:, :, :1]
    ab_full = F.interpolate(ab[None].float().cpu(), size=(height, width))[0].numpy().transpose(1, 2, 0)
    rgb = cv2.cvtColor(np.concatenate([lightness, ab_full], axis=-1), cv2.COLOR_LAB2RGB)
    return (rgb * 255.0).round().astype(np.uint8)


def colorize_batch(model: DDColor, photos: Sequence[np.ndarray], size_px: int = DEFAULT_SIZE_PX) -> list[np.ndarray]:
    """Colorize ``photos`` in one forward pass at ``size_px``², on the model's device and in its dtype."""
    batch = torch.from_numpy(np.stack([gray_input(photo, size_px) for photo in photos]))
    with torch.inference_mode():
        ab = model(batch.to(device=model.mean.device, dtype=model.mean.dtype))
    return [join_color(photo, item) for photo, item in zip(photos, ab)]
