"""MTCNN (Zhang et al. 2016): a three-stage cascade for small faces, weights from the ``facenet-pytorch`` wheel.

Why a second detector: BlazeFace was trained on faces near the camera and loses small, grey, grainy faces in old group
photos even when tiled; MTCNN's first network scans every 12 px window of an image pyramid, so faces of 20–100 px are
its home ground. The three networks are written here from their published layout; their parameter names and shapes
are those of the wheel's ``pnet.pt``, ``rnet.pt`` and ``onet.pt`` (plain state dicts, read with ``weights_only``), so
facenet-pytorch itself (which pins an old torch) is never imported.

Cascade: P-Net proposes boxes on a pyramid restricted to the face sizes asked for, R-Net (24 px crops) and O-Net (48 px
crops) re-score and regress them, O-Net adds five points. Inputs are RGB scaled to [-1, 1] as in training. Boxes are
handled in continuous image coordinates and returned in pixel-index coordinates, like :mod:`deployments.faces.detect`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.faces.detection import EYE_DISTANCE_PER_BOX, Detection, DetectionParams, non_max_suppression

logger = logging.getLogger(__name__)

PNET_WINDOW_PX = 12  # P-Net sees 12x12 windows with a stride of 2 px
PNET_STRIDE_PX = 2
# Crop pixels per R-Net / O-Net forward pass (memory bound): 1024 R-Net crops, 256 O-Net crops (O-Net's first layer
# holds ~270 KiB of activations per crop: 1024 crops took 450 MiB)
CROP_PX_PER_BATCH = 1024 * 24 * 24
PNET_STRIP_INPUT_PX = 1_000_000  # input pixels per P-Net strip (~40 MiB of first-layer activations)
RNET_INPUT_PX = 24
ONET_INPUT_PX = 48
WEIGHT_FILES = {"pnet": "pnet.pt", "rnet": "rnet.pt", "onet": "onet.pt"}
# Small-face pass: the stages let candidates through from these probabilities (MTCNN's usual thresholds are 0.6 /
# 0.7 / 0.7; at 0.3 each, a fifth of #25's 28–60 px faces had no candidate); which stay is decided by ``confirm``.
# P-Net stays at 0.3: at 0.1 it proposed 50,000 windows on a 10 MP group photo (100 s of NMS) for 2 % more faces.
MTCNN_CANDIDATE_SCORES = (0.3, 0.1, 0.1)
PNET_MAX_WINDOWS_PER_SCALE = 20_000  # the best P-Net windows of one pyramid scale kept for NMS (bounds its cost)
# MTCNN boxes run from the brows to the chin (taller than wide); BlazeFace's are square and centred lower. Measured
# on 290 faces both found: BlazeFace side = 1.12 x MTCNN width = 0.93 x MTCNN height, centre 0.10 x height lower.
# Mapping MTCNN boxes onto BlazeFace's lets weighted NMS merge the two detectors' hits on one face.
BLAZEFACE_SIDE_PER_WIDTH = 1.12
BLAZEFACE_SIDE_PER_HEIGHT = 0.93
BLAZEFACE_CENTRE_DROP_PER_HEIGHT = 0.10
# (out channels, kernel, max-pool (kernel, stride) or None) per conv layer, named conv1.. / prelu1.. in the weights.
PNET_TRUNK = ((10, 3, (2, 2)), (16, 3, None), (32, 3, None))
RNET_TRUNK = ((28, 3, (3, 2)), (48, 3, (3, 2)), (64, 2, None))
ONET_TRUNK = ((32, 3, (3, 2)), (64, 3, (3, 2)), (64, 3, (2, 2)), (128, 2, None))


class _ConvTrunk(nn.Module):
    """Conv + PReLU (+ ceil-mode max-pool) layers named ``conv1``, ``prelu1``... as in the shipped weights."""

    def __init__(self, trunk: tuple[tuple[int, int, tuple[int, int] | None], ...]) -> None:
        super().__init__()
        channels = 3
        self.pools: list[nn.Module | None] = []
        for index, (out_channels, kernel, pool) in enumerate(trunk, start=1):
            setattr(self, f"conv{index}", nn.Conv2d(channels, out_channels, kernel_size=kernel))
            setattr(self, f"prelu{index}", nn.PReLU(out_channels))
            self.pools.append(nn.MaxPool2d(pool[0], pool[1], ceil_mode=True) if pool else None)
            channels = out_channels
        self.trunk_layers = len(trunk)

    def trunk(self, x: torch.Tensor) -> torch.Tensor:
        for index, pool in enumerate(self.pools, start=1):
            x = getattr(self, f"prelu{index}")(getattr(self, f"conv{index}")(x))
            if pool is not None:
                x = pool(x)
        return x


class PNet(_ConvTrunk):
    """Fully convolutional proposal net: per 12 px window, face probability ``(N, H', W')`` and box offsets
    ``(N, 4, H', W')`` (fractions of the window side)."""

    def __init__(self) -> None:
        super().__init__(PNET_TRUNK)
        self.conv4_1 = nn.Conv2d(32, 2, kernel_size=1)
        self.conv4_2 = nn.Conv2d(32, 4, kernel_size=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.trunk(x)
        return torch.softmax(self.conv4_1(features), dim=1)[:, 1], self.conv4_2(features)


class _DenseHeadNet(_ConvTrunk):
    """Conv trunk, then one PReLU dense layer and linear heads (``dense{n}``, ``dense{n+1}_{k}``)."""

    def __init__(self, trunk, flat_features: int, hidden: int, heads: tuple[int, ...]) -> None:
        super().__init__(trunk)
        n = self.trunk_layers + 1
        self.dense_name, self.prelu_name = f"dense{n}", f"prelu{n}"
        setattr(self, self.dense_name, nn.Linear(flat_features, hidden))
        setattr(self, self.prelu_name, nn.PReLU(hidden))
        self.head_names = [f"dense{n + 1}_{k}" for k in range(1, len(heads) + 1)]
        for name, width in zip(self.head_names, heads):
            setattr(self, name, nn.Linear(hidden, width))

    def heads(self, x: torch.Tensor) -> list[torch.Tensor]:
        # the weights were ported from a width-major layout: flatten as (N, W, H, C)
        features = self.trunk(x).permute(0, 3, 2, 1).flatten(1)
        hidden = getattr(self, self.prelu_name)(getattr(self, self.dense_name)(features))
        return [getattr(self, name)(hidden) for name in self.head_names]


class RNet(_DenseHeadNet):
    """Refinement net on 24x24 crops: face probability ``(N,)`` and box offsets ``(N, 4)``."""

    def __init__(self) -> None:
        super().__init__(RNET_TRUNK, 576, 128, (2, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, offsets = self.heads(x)
        return torch.softmax(logits, dim=1)[:, 1], offsets


class ONet(_DenseHeadNet):
    """Output net on 48x48 crops: face probability ``(N,)``, box offsets ``(N, 4)`` and five points ``(N, 5, 2)``
    as fractions of the crop (image-left eye, image-right eye, nose, image-left and image-right mouth corner)."""

    def __init__(self) -> None:
        super().__init__(ONET_TRUNK, 1152, 256, (2, 4, 10))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, offsets, points = self.heads(x)
        return torch.softmax(logits, dim=1)[:, 1], offsets, torch.stack([points[:, :5], points[:, 5:]], dim=2)


def load_net(net: nn.Module, path: Path) -> nn.Module:
    """Strictly load one shipped state dict (plain tensors only) into ``net``, in eval mode."""
    if not path.is_file():
        raise ModelUnavailable(f"MTCNN weights missing: {path}", details={"path": str(path)})
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict(state, strict=True)
    except (RuntimeError, ValueError, OSError) as exc:  # torch reports bad pickles and key mismatches as these
        raise ModelUnavailable(f"cannot load MTCNN weights {path.name}: {exc}") from exc
    return net.eval()


@dataclass(frozen=True)
class MtcnnParams:
    """Face sizes searched (box side in px) and the per-stage probability thresholds."""

    min_face_px: float = 20.0
    max_face_px: float = 120.0
    scale_step: float = 0.709
    thresholds: tuple[float, float, float] = (0.6, 0.7, 0.7)

    def __post_init__(self) -> None:
        if not PNET_WINDOW_PX / 2 <= self.min_face_px <= self.max_face_px:
            raise InvalidParameter(f"MTCNN face sizes must satisfy 6 <= min <= max, got {self}")
        if not 0.3 <= self.scale_step < 0.95 or not all(0.0 < t < 1.0 for t in self.thresholds):
            raise InvalidParameter(f"MTCNN scale_step must be in [0.3, 0.95) and thresholds in (0, 1), got {self}")

    def scales(self, width: int, height: int) -> list[float]:
        """Pyramid scales: a face of ``min_face_px`` becomes one 12 px window, down to ``max_face_px`` or the image."""
        scales = []
        scale = PNET_WINDOW_PX / self.min_face_px
        while min(width, height) * scale >= PNET_WINDOW_PX and PNET_WINDOW_PX / scale <= self.max_face_px * 1.001:
            scales.append(scale)
            scale *= self.scale_step
        return scales


class Mtcnn:
    """The three networks on CPU; one instance serves many threads (no state between calls)."""

    def __init__(self, weights_dir: Path | str) -> None:
        folder = Path(weights_dir)
        # channels-last halves P-Net's time on large pyramids (measured: 0.78 -> 0.40 s on 2000x1400, one core)
        self.pnet = load_net(PNet(), folder / WEIGHT_FILES["pnet"]).to(memory_format=torch.channels_last)
        self.rnet = load_net(RNet(), folder / WEIGHT_FILES["rnet"])
        self.onet = load_net(ONet(), folder / WEIGHT_FILES["onet"])

    @torch.inference_mode()
    def detect(self, image_rgb: np.ndarray, params: MtcnnParams = MtcnnParams()) -> list[Detection]:
        """Faces between ``min_face_px`` and ``max_face_px`` in ``image_rgb`` (HxWx3 uint8), best first."""
        boxes, scores = self._propose(image_rgb, params)
        if len(boxes):
            boxes, scores = self._refine(image_rgb, boxes, params.thresholds[1])
        if not len(boxes):
            return []
        return self._output(image_rgb, boxes, params.thresholds[2])

    def detect_small_faces(self, image_rgb: np.ndarray, params: DetectionParams) -> list[Detection]:
        """Faces from ``params.min_eye_px`` up to ``params.small_face_max_px``, boxes in BlazeFace's convention."""
        min_side_px = params.min_eye_px / EYE_DISTANCE_PER_BOX / BLAZEFACE_SIDE_PER_WIDTH
        max_side_px = max(min_side_px, params.small_face_max_px / BLAZEFACE_SIDE_PER_WIDTH)
        found = self.detect(image_rgb, MtcnnParams(min_side_px, max_side_px, thresholds=MTCNN_CANDIDATE_SCORES))
        return [as_blazeface_box(detection) for detection in found]

    @torch.inference_mode()
    def rate(
        self, image_rgb: np.ndarray, centres: np.ndarray, sides: np.ndarray, mirrored: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """O-Net's and R-Net's look at BlazeFace-style boxes (``centres`` ``(K, 2)``, ``sides`` ``(K,)``, pixel
        index), cropped as MTCNN crops its own boxes (square, brows to chin) and, if ``mirrored``, flipped: O-Net's
        probabilities ``(K,)``, its eyes ``(K, 2, 2)`` in image pixels (mapped back from the mirror) and R-Net's
        probabilities ``(K,)`` (on the 48 px crop shrunk to 24 px)."""
        side = sides / (0.5 * (BLAZEFACE_SIDE_PER_WIDTH + BLAZEFACE_SIDE_PER_HEIGHT))
        centre_x = centres[:, 0] + 0.5  # -> continuous
        centre_y = centres[:, 1] + 0.5 - BLAZEFACE_CENTRE_DROP_PER_HEIGHT * side
        boxes = np.stack([centre_x - side / 2, centre_y - side / 2, centre_x + side / 2, centre_y + side / 2], axis=1)
        onet_probs, eyes, rnet_probs = [], [], []
        per_batch = _crops_per_batch(ONET_INPUT_PX)
        for start in range(0, len(boxes), per_batch):
            crops = _crops(image_rgb, boxes[start : start + per_batch], ONET_INPUT_PX)
            if mirrored:
                crops = np.ascontiguousarray(crops[:, :, ::-1])
            probs, _, points = self.onet(_to_tensor(crops))
            small = np.stack([cv2.resize(c, (RNET_INPUT_PX,) * 2, interpolation=cv2.INTER_AREA) for c in crops])
            onet_probs.append(probs.numpy())
            eyes.append(points[:, :2].numpy())
            rnet_probs.append(self.rnet(_to_tensor(small))[0].numpy())
        eyes = np.concatenate(eyes)
        if mirrored:
            eyes[..., 0] = 1.0 - eyes[..., 0]
        integer = _integer_boxes(boxes)
        eyes = integer[:, None, :2] + eyes * (integer[:, None, 2:] - integer[:, None, :2]) - 0.5  # -> pixel index
        return np.concatenate(onet_probs), eyes, np.concatenate(rnet_probs)

    def _propose(self, image_rgb: np.ndarray, params: MtcnnParams) -> tuple[np.ndarray, np.ndarray]:
        """P-Net over the pyramid: square candidate boxes ``(K, 4)`` (continuous px) and their scores."""
        height, width = image_rgb.shape[:2]
        all_boxes, all_scores = [], []
        for scale in params.scales(width, height):
            size = (max(PNET_WINDOW_PX, math.ceil(width * scale)), max(PNET_WINDOW_PX, math.ceil(height * scale)))
            level = cv2.resize(image_rgb, size, interpolation=cv2.INTER_AREA)
            ys, xs, scores, offsets = self._pnet_strips(level, params.thresholds[0])
            if not len(ys):
                continue
            sx, sy = size[0] / width, size[1] / height
            window = np.stack([xs * PNET_STRIDE_PX, ys * PNET_STRIDE_PX], axis=1).astype(np.float64)
            boxes = np.concatenate([window / (sx, sy), (window + PNET_WINDOW_PX) / (sx, sy)], axis=1)
            keep = non_max_suppression(boxes, scores, 0.5)
            all_boxes.append(_regress(boxes[keep], offsets[keep]))
            all_scores.append(scores[keep])
        if not all_boxes:
            return np.zeros((0, 4)), np.zeros(0)
        boxes, scores = np.concatenate(all_boxes), np.concatenate(all_scores)
        keep = non_max_suppression(boxes, scores, 0.7)
        return _square(boxes[keep]), scores[keep]

    def _pnet_strips(self, level: np.ndarray, threshold: float) -> tuple[np.ndarray, ...]:
        """P-Net on one pyramid level in strips of output rows, so its float activations stay within
        ``PNET_STRIP_INPUT_PX`` input pixels whatever the photo (a whole 50 MP level held 1.6 GiB of them).

        Output row ``i`` sees input rows ``[2i, 2i + 12)``: a strip of output rows ``[a, b)`` reads input rows
        ``[2a, 2b + 10)``, and the last strip reads to the bottom edge, so every window (the ceil-mode pooled edge
        row included) sees exactly what it sees on the whole level. Returns the windows over ``threshold``, at most
        the ``PNET_MAX_WINDOWS_PER_SCALE`` best (trimmed as the strips come, so a busy 50 MP level holds no more):
        rows, columns, scores and box offsets ``(K, 4)``."""
        height, width = level.shape[:2]
        out_rows = max(1, (height - PNET_WINDOW_PX) // PNET_STRIDE_PX + 1)
        strip_rows = max(1, PNET_STRIP_INPUT_PX // (PNET_STRIDE_PX * width))
        found: list[tuple[np.ndarray, ...]] = []
        for first in range(0, out_rows, strip_rows):
            last = first + strip_rows
            bottom = height if last >= out_rows else PNET_STRIDE_PX * last + PNET_WINDOW_PX - PNET_STRIDE_PX
            strip = _to_tensor(level[None, PNET_STRIDE_PX * first : bottom])
            probs, offsets = self.pnet(strip.contiguous(memory_format=torch.channels_last))
            probs, offsets = probs[0].numpy(), offsets[0].numpy()
            ys, xs = np.nonzero(probs >= threshold)
            found.append((ys + first, xs, probs[ys, xs], offsets[:, ys, xs].T))
            if sum(len(part[2]) for part in found) > PNET_MAX_WINDOWS_PER_SCALE:
                found = [_best_windows(tuple(np.concatenate(parts) for parts in zip(*found)))]
        return tuple(np.concatenate(parts) for parts in zip(*found))

    def _refine(self, image_rgb: np.ndarray, boxes: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        probs, offsets = _in_batches(self.rnet, image_rgb, boxes, RNET_INPUT_PX)
        passed = probs >= threshold
        boxes, probs, offsets = _integer_boxes(boxes)[passed], probs[passed], offsets[passed]
        keep = non_max_suppression(boxes, probs, 0.7)
        return _square(_regress(boxes[keep], offsets[keep])), probs[keep]

    def _output(self, image_rgb: np.ndarray, boxes: np.ndarray, threshold: float) -> list[Detection]:
        probs, offsets, points = _in_batches(self.onet, image_rgb, boxes, ONET_INPUT_PX)
        passed = probs >= threshold
        boxes, probs, offsets, points = _integer_boxes(boxes)[passed], probs[passed], offsets[passed], points[passed]
        sides = (boxes[:, 2:] - boxes[:, :2])[:, None, :]
        points = boxes[:, None, :2] + points * sides
        boxes = _regress(boxes, offsets)
        keep = non_max_suppression(boxes, probs, 0.7, overlap="min")
        detections = []
        for box, score, five in zip(boxes[keep], probs[keep], points[keep]):
            keypoints = np.stack([five[0], five[1], five[2], (five[3] + five[4]) / 2]) - 0.5  # -> pixel index
            detections.append(Detection((box - 0.5).astype(np.float32), float(score), keypoints.astype(np.float32)))
        return detections


def _best_windows(windows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The ``PNET_MAX_WINDOWS_PER_SCALE`` best of P-Net's windows (rows, columns, scores, offsets)."""
    scores = windows[2]
    if len(scores) <= PNET_MAX_WINDOWS_PER_SCALE:
        return windows
    best = np.argpartition(-scores, PNET_MAX_WINDOWS_PER_SCALE)[:PNET_MAX_WINDOWS_PER_SCALE]
    return tuple(part[best] for part in windows)


def as_blazeface_box(detection: Detection) -> Detection:
    """The same face with its box mapped onto BlazeFace's convention (square, centred lower)."""
    x0, y0, x1, y1 = (float(v) for v in detection.box)
    width, height = x1 - x0, y1 - y0
    side = 0.5 * (BLAZEFACE_SIDE_PER_WIDTH * width + BLAZEFACE_SIDE_PER_HEIGHT * height)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2 + BLAZEFACE_CENTRE_DROP_PER_HEIGHT * height
    box = np.array([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], np.float32)
    return Detection(box, detection.score, detection.keypoints)


def _in_batches(net: nn.Module, image_rgb: np.ndarray, boxes: np.ndarray, size_px: int) -> tuple[np.ndarray, ...]:
    """``net`` on the crops of ``boxes``, ``CROP_PX_PER_BATCH`` crop pixels at a time (a busy 50 MP photo has 10^5
    candidates), its outputs joined as arrays."""
    per_batch = _crops_per_batch(size_px)
    outputs = [
        net(_to_tensor(_crops(image_rgb, boxes[start : start + per_batch], size_px)))
        for start in range(0, len(boxes), per_batch)
    ]
    return tuple(torch.cat(parts).numpy() for parts in zip(*outputs))


def _crops_per_batch(size_px: int) -> int:
    return max(1, CROP_PX_PER_BATCH // (size_px * size_px))


def _to_tensor(batch_rgb: np.ndarray) -> torch.Tensor:
    """``(N, H, W, 3)`` uint8 -> ``(N, 3, H, W)`` float in [-1, 1] (MTCNN's (x - 127.5) / 128)."""
    tensor = torch.from_numpy(np.ascontiguousarray(batch_rgb)).permute(0, 3, 1, 2).float()
    return (tensor - 127.5) * 0.0078125


def _regress(boxes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Shift each corner by its offset times the box's width or height."""
    sides = np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)
    return boxes + offsets * sides


def _square(boxes: np.ndarray) -> np.ndarray:
    """Squares of the longer side, same centres (the next stage sees square crops)."""
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    half = np.max(boxes[:, 2:] - boxes[:, :2], axis=1, keepdims=True) / 2
    return np.concatenate([centres - half, centres + half], axis=1)


def _integer_boxes(boxes: np.ndarray) -> np.ndarray:
    """The pixel-aligned boxes :func:`_crops` cuts (so offsets and points refer to what the network saw)."""
    origin = np.floor(boxes[:, :2] + 0.5)
    side = np.maximum(1.0, np.round(boxes[:, 2] - boxes[:, 0]))[:, None]
    return np.concatenate([origin, origin + side], axis=1)


def _crops(image_rgb: np.ndarray, boxes: np.ndarray, size_px: int) -> np.ndarray:
    """Square crops of ``boxes`` resized to ``size_px``; outside the image is black, as in MTCNN's training."""
    height, width = image_rgb.shape[:2]
    out = np.zeros((len(boxes), size_px, size_px, 3), np.uint8)
    for index, (x0, y0, x1, y1) in enumerate(_integer_boxes(boxes).astype(int)):
        side = x1 - x0
        patch = np.zeros((side, side, 3), np.uint8)
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
        if cx1 > cx0 and cy1 > cy0:
            patch[cy0 - y0 : cy1 - y0, cx0 - x0 : cx1 - x0] = image_rgb[cy0:cy1, cx0:cx1]
        interpolation = cv2.INTER_AREA if side > size_px else cv2.INTER_LINEAR
        out[index] = cv2.resize(patch, (size_px, size_px), interpolation=interpolation)
    return out
