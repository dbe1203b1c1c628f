"""The edit job's pure steps below the editor: the look laid on the photo at its strength, inside the face mask only
for ``scope=face`` (every pixel outside it bit-identical to the photo), then the person's own face blended back by
``identity_keep``. Images follow the package contract (HxWx3 uint8 RGB); masks are HxW float32 in [0, 1]."""

from __future__ import annotations

import numpy as np


def compose_edit(
    base: np.ndarray,
    styled: np.ndarray,
    *,
    strength: float,
    region: np.ndarray | None,
    face: np.ndarray | None,
    identity_keep: float,
) -> np.ndarray:
    """``styled`` over ``base``: weighted by ``strength``, and by ``region`` where given (``scope=face``); the faces
    (``face``: their mask) get ``identity_keep`` of ``base`` back. Pixels of weight 0 are ``base``'s own bytes."""
    weight = np.full(base.shape[:2], np.float32(strength), np.float32)
    if region is not None:
        weight *= region
    if face is not None and identity_keep > 0.0:
        weight *= 1.0 - np.float32(identity_keep) * face
    touched = weight > 0.0
    result = base.copy()
    if not touched.any():
        return result
    w = weight[touched][:, None]
    mixed = base[touched].astype(np.float32) * (1.0 - w) + styled[touched].astype(np.float32) * w
    result[touched] = np.clip(np.rint(mixed), 0, 255).astype(np.uint8)
    return result
