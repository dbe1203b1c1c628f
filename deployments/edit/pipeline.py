"""The edit job's pure steps below the editor: the look laid on the photo at its strength, inside the face mask only
for ``scope=face`` (every pixel outside it bit-identical to the photo), then the person's own face blended back by
``identity_keep``. Images follow the package contract (HxWx3 uint8 RGB); masks are HxW float32 in [0, 1]."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from deployments.faces.types import Face

# A face's own fine detail, what tells one person from another, lies below this many eye distances (a Gaussian's
# sigma): finer than the look's tones and colours, as fine as its grain.
FACE_DETAIL_SIGMA_E = 0.3
LUMA = np.array([0.299, 0.587, 0.114], np.float32)


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


def keep_face_detail(base: np.ndarray, styled: np.ndarray, faces: Sequence[Face], mask: np.ndarray) -> np.ndarray:
    """``styled`` (a film look over ``base``) with each face's fine luminance detail taken from ``base``: the look's
    tones and colours stay (its low frequencies), the grain and the fade's flattened contrast do not rewrite a face's
    features (the identity judge moved small faces of old photos below its bar without this: docs/BENCHMARKS.md
    "Film looks"). Luminance only, added to every channel: a black-and-white look stays grey. ``mask``: the faces'
    feathered region (``face_mask``); outside it ``styled`` is unchanged."""
    touched = mask > 0.0
    if not touched.any() or not faces:
        return styled
    sigma = max(0.5, FACE_DETAIL_SIGMA_E * min(face.eye_distance_px for face in faces))
    ys, xs = np.nonzero(touched)
    pad = int(np.ceil(4 * sigma)) + 1
    top, bottom = max(ys.min() - pad, 0), min(ys.max() + pad + 1, base.shape[0])
    left, right = max(xs.min() - pad, 0), min(xs.max() + pad + 1, base.shape[1])
    window = (slice(top, bottom), slice(left, right))
    luma = base[window].astype(np.float32) @ LUMA
    detail = luma - cv2.GaussianBlur(luma, (0, 0), sigma)
    look = styled[window].astype(np.float32)
    look_luma = look @ LUMA
    look_detail = look_luma - cv2.GaussianBlur(look_luma, (0, 0), sigma)
    kept = look + ((detail - look_detail) * mask[window])[..., None]
    out = styled.copy()
    out[window] = np.clip(np.rint(kept), 0, 255).astype(np.uint8)
    return out
