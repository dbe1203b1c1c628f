"""The official DDColor pre- and post-processing around the network, on the service's image contract.

As ``ColorizationPipeline.process`` in piddnad/DDColor ``ddcolor/pipeline.py`` does it, step for step: the photo as
float32 in [0, 1]; resized (bilinear) to ``size_px × size_px``; its Lab ``L`` alone turned back into a gray RGB image
(the network input); the predicted ``(a, b)`` resized to the photo's size (nearest) and joined with the photo's own
full-resolution ``L``; Lab → RGB by OpenCV's float conversion (which clips to [0, 1]); ×255, rounded. The official code
works in BGR and we in RGB: every step is per channel or colour-order symmetric, so the result is the same pixels.

Torch-free, so the job at the edge prepares the input and joins the colours at the photo's size, and the Colorizer
replica runs only the network (3 MB in, 2 MB out per photo at 512², whatever the photo's size).
Images are ``(H, W, 3)`` uint8 RGB (``deployments.common.image``).
"""

from __future__ import annotations

import cv2
import numpy as np

from deployments.common.errors import InvalidParameter

INPUT_MULTIPLE_PX = 32  # the network's total stride
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


def nearest_indices(in_size: int, out_size: int) -> np.ndarray:
    """Source index of each output index under ``torch.nn.functional.interpolate(mode="nearest")``: the float32
    product ``floor(i · (in/out))``, clipped (what the official post-processing calls, computed without torch)."""
    if in_size == out_size:
        return np.arange(out_size)
    scale = np.float32(in_size) / np.float32(out_size)
    indices = np.floor(np.arange(out_size, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(indices, in_size - 1)


def join_color(photo: np.ndarray, ab: np.ndarray) -> np.ndarray:
    """``photo``'s own ``L`` with the predicted ``ab`` (``2×s×s`` float32) resized to it (nearest) → uint8 RGB."""
    height, width = photo.shape[:2]
    lightness = cv2.cvtColor(_unit_float(photo), cv2.COLOR_RGB2Lab)[:, :, :1]
    rows, cols = nearest_indices(ab.shape[1], height), nearest_indices(ab.shape[2], width)
    ab_full = ab.transpose(1, 2, 0)[rows[:, None], cols[None, :]].astype(np.float32)
    rgb = cv2.cvtColor(np.concatenate([lightness, ab_full], axis=-1), cv2.COLOR_LAB2RGB)
    return (rgb * 255.0).round().astype(np.uint8)
