"""Pre/post-processing and batched inference for the face restorers, as plain functions the deployment calls.

Crops follow the package image contract (HxWx3 uint8 RGB). Pre-processing is the official one of all three families
(GPEN's ``face_gan.py``, GFPGANer and CodeFormer's ``img2tensor`` + ``normalize``): /255, (x−0.5)/0.5, minus the BGR
round trip since our models take RGB. Post-processing: ×0.5+0.5, clip to [0, 1], ×255, then GPEN's demo truncates to
uint8 while basicsr's ``tensor2img`` (GFPGAN, CodeFormer) rounds: ``round_output`` picks.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch import nn

from deployments.common.errors import InternalError
from deployments.common.image import require_image
from deployments.common.torch_device import autocast
from deployments.common.torch_device import autocast_dtype as amp_dtype_for


def faces_to_tensor(crops: list[np.ndarray], size: int) -> torch.Tensor:
    """Stack RGB uint8 crops into a B×3×size×size float32 tensor in [-1, 1], resizing crops that differ in size."""
    if not crops:
        return torch.empty((0, 3, size, size), dtype=torch.float32)
    batch = np.empty((len(crops), size, size, 3), dtype=np.uint8)
    for index, crop in enumerate(crops):
        require_image(crop, what=f"crop {index}")
        batch[index] = crop if crop.shape[:2] == (size, size) else cv2.resize(crop, (size, size))
    tensor = torch.from_numpy(batch) / 255.0
    tensor = (tensor - 0.5) / 0.5
    return tensor.permute(0, 3, 1, 2).contiguous()


def tensor_to_faces(images: torch.Tensor, *, round_output: bool = False) -> list[np.ndarray]:
    """B×3×H×W model output in [-1, 1] (any float dtype, any device) → HxWx3 uint8 RGB faces, truncated (GPEN) or
    rounded (``round_output``: basicsr's ``tensor2img``)."""
    if images.ndim != 4 or images.shape[1] != 3:
        raise InternalError(f"a restorer returned {tuple(images.shape)}, not B×3×H×W images")
    hwc = (images * 0.5 + 0.5).permute(0, 2, 3, 1).float().cpu().numpy()
    scaled = np.clip(hwc, 0, 1) * 255.0
    if round_output:
        scaled = np.round(scaled)
    return [np.ascontiguousarray(face.astype(np.uint8)) for face in scaled]


def restore_batch(
    model: nn.Module,
    crops: list[np.ndarray],
    *,
    size_px: int,
    fidelities: list[float] | None = None,
    round_output: bool = False,
    device: str | torch.device = "cpu",
    autocast_dtype: str | None = None,
    channels_last: bool = False,
) -> list[np.ndarray]:
    """Restore all crops in one forward pass; returns size×size RGB uint8 faces, one per crop, in order.

    ``model`` is a loaded restorer already on ``device`` (convert it once to channels-last when passing
    ``channels_last=True``); ``fidelities`` (one per crop) go to a model that takes them (CodeFormer's ``w``).
    ``autocast_dtype`` (``torch_device.AUTOCAST_DTYPES``) is honoured only on CUDA, where it pays off.
    """
    if not crops:
        return []
    torch_device = torch.device(device)
    amp_dtype = amp_dtype_for(autocast_dtype, torch_device)
    batch = faces_to_tensor(crops, size_px).to(torch_device)
    if channels_last:
        batch = batch.contiguous(memory_format=torch.channels_last)
    with torch.inference_mode(), autocast(amp_dtype):
        restored = model(batch) if fidelities is None else model(batch, torch.tensor(fidelities))
    return tensor_to_faces(restored, round_output=round_output)
