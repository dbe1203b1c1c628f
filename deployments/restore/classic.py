"""Classic (non-neural) face restoration: what a restorer runs when its model's weights (GFPGAN, CodeFormer, GPEN)
are absent; answers name it ``classic-restore``.

It is *not* a generative restorer: it cannot invent detail that the photo lacks (pores, sharp eyelashes, a face
under heavy blur or JPEG blocks). It removes sensor/compression noise with an edge-preserving bilateral filter and
then re-sharpens edges with an unsharp mask on luminance only, so colours do not fringe. Deterministic, any crop size.

Why bilateral rather than non-local means: measured on one core at 512×512 (skimage astronaut, Gaussian noise σ=15),
``cv2.fastNlMeansDenoisingColored`` costs 400–2300 ms for at most +3.7 dB, the bilateral filter below ~25–40 ms for
+5.4 dB (+3 dB after sharpening).
"""

from __future__ import annotations

import cv2
import numpy as np

from deployments.common.image import require_image

BILATERAL_DIAMETER_PX = 7
BILATERAL_SIGMA_COLOR = 35.0
BILATERAL_SIGMA_SPACE_PX = 7.0
UNSHARP_SIGMA_PX = 1.5
UNSHARP_AMOUNT = 0.5
# Luminance detail below this many grey levels is left alone (mostly residual noise); the gain ramps up to twice it.
UNSHARP_THRESHOLD_LEVELS = 2.0


def restore_face_classic(crop: np.ndarray) -> np.ndarray:
    """Denoise then sharpen one face crop: HxWx3 uint8 RGB in, same shape and dtype out."""
    require_image(crop, what="face crop")
    denoised = cv2.bilateralFilter(
        np.ascontiguousarray(crop), BILATERAL_DIAMETER_PX, BILATERAL_SIGMA_COLOR, BILATERAL_SIGMA_SPACE_PX
    )
    return _sharpen_luminance(denoised)


def _sharpen_luminance(rgb: np.ndarray) -> np.ndarray:
    """Thresholded unsharp mask on the Y channel of YCrCb."""
    ycrcb = cv2.cvtColor(rgb, cv2.COLOR_RGB2YCrCb)
    luma = ycrcb[..., 0].astype(np.float32)
    detail = luma - cv2.GaussianBlur(luma, (0, 0), UNSHARP_SIGMA_PX)
    ramp = np.clip((np.abs(detail) - UNSHARP_THRESHOLD_LEVELS) / UNSHARP_THRESHOLD_LEVELS, 0.0, 1.0)
    ycrcb[..., 0] = np.clip(luma + UNSHARP_AMOUNT * ramp * detail + 0.5, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(cv2.cvtColor(ycrcb, cv2.COLOR_YCrCb2RGB))
