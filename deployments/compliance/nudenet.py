"""NudeNet's body-part detector (notAI-tech/NudeNet 3.4, ``320n.onnx``: YOLOv8n at 320x320, 18 classes), with its
official pre- and post-processing written here from ``nudenet/nudenet.py`` of the ``nudenet==3.4.2`` wheel. The package
itself is never imported (a replica need not have it; the model file comes from our store); onnxruntime runs the
network on a CPU.

Pre-processing (``network_input``): the photo padded with black at its right and bottom to a square (not centred),
resized to 320x320 (bilinear, as ``cv2.dnn.blobFromImage``), scaled to [0, 1], NCHW, RGB. The official Python reads
a file with ``cv2.imread`` (BGR) and swaps the channels twice (``COLOR_RGBA2BGR`` on three channels, then
``swapRB``), so a file reaches the network as BGR there; its browser demo, which that code follows, gives the network
RGB, the order ultralytics trains in, as does the Python ``detect`` given an array. We give it RGB.

Post-processing (``decode``): the output is ``(4 + 18) x 2100`` per photo: box centre, width and height in 320-pixel
units, then one score per class. A column counts when its best class scores 0.2 or more; its box is scaled by
``side / 320`` back to the photo (the padding is at the far edges, so no offset) and clipped to it; then one NMS over
all classes together (``cv2.dnn.NMSBoxes``, score 0.25, IoU 0.45); boxes truncated to whole pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from deployments.compliance.types import Detection

# The official class order (nudenet.py's ``__labels``): the network's score rows 4.. are these.
LABELS: tuple[str, ...] = (
    "FEMALE_GENITALIA_COVERED",
    "FACE_FEMALE",
    "BUTTOCKS_EXPOSED",
    "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED",
    "MALE_BREAST_EXPOSED",
    "ANUS_EXPOSED",
    "FEET_EXPOSED",
    "BELLY_COVERED",
    "FEET_COVERED",
    "ARMPITS_COVERED",
    "ARMPITS_EXPOSED",
    "FACE_MALE",
    "BELLY_EXPOSED",
    "MALE_GENITALIA_EXPOSED",
    "ANUS_COVERED",
    "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
)
INPUT_SIZE = 320
CANDIDATE_SCORE = 0.2  # a column below this is no candidate
NMS_SCORE = 0.25  # the score NMS keeps (so nothing under 0.25 is reported)
NMS_IOU = 0.45


def network_input(rgb: np.ndarray) -> np.ndarray:
    """The photo as the network's input: 3x320x320 float32 in [0, 1], RGB, padded at the right and bottom."""
    height, width = rgb.shape[:2]
    side = max(height, width)
    square = cv2.copyMakeBorder(
        np.ascontiguousarray(rgb), 0, side - height, 0, side - width, cv2.BORDER_CONSTANT, value=(0, 0, 0)
    )
    resized = cv2.resize(square, (INPUT_SIZE, INPUT_SIZE), interpolation=cv2.INTER_LINEAR)
    # blobFromImage converts with a double scale, then stores float32: the same rounding here.
    return (resized.transpose(2, 0, 1) * (1.0 / 255.0)).astype(np.float32)


def decode(output: np.ndarray, size_hw: tuple[int, int]) -> list[Detection]:
    """One photo's detections from its ``(22, 2100)`` output (``size_hw``: the photo's height and width)."""
    height, width = size_hw
    rows = np.asarray(output, dtype=np.float32).T
    scores = rows[:, 4:]
    best = scores.max(axis=1)
    keep = best >= CANDIDATE_SCORE
    if not keep.any():
        return []
    rows, scores, best = rows[keep], scores[keep], best[keep]
    classes = scores.argmax(axis=1)
    scale = max(height, width) / INPUT_SIZE
    boxes = []
    for cx, cy, w, h in rows[:, :4].astype(np.float64):
        x = min(max((cx - w / 2) * scale, 0.0), width)
        y = min(max((cy - h / 2) * scale, 0.0), height)
        boxes.append([x, y, min(w * scale, width - x), min(h * scale, height - y)])
    kept = cv2.dnn.NMSBoxes(boxes, best.astype(float).tolist(), NMS_SCORE, NMS_IOU)
    return [
        Detection(LABELS[int(classes[i])], float(best[i]), tuple(int(v) for v in boxes[i]))  # type: ignore[arg-type]
        for i in np.asarray(kept, dtype=int).reshape(-1)
    ]


class NudeNetDetector:
    """The network in an onnxruntime session on the CPU (one intra-op thread: replicas, not threads, use cores)."""

    def __init__(self, path: str | Path, *, threads: int = 1) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._input = self._session.get_inputs()[0].name

    def run(self, batch: np.ndarray) -> np.ndarray:
        """The raw output ``(N, 22, 2100)`` for inputs ``(N, 3, 320, 320)``."""
        return self._session.run(None, {self._input: batch})[0]

    def detect(self, photos: Sequence[np.ndarray]) -> list[list[Detection]]:
        """Each photo's detections, all photos in one forward pass."""
        if not photos:
            return []
        outputs = self.run(np.stack([network_input(photo) for photo in photos]))
        return [decode(output, photo.shape[:2]) for output, photo in zip(outputs, photos)]
