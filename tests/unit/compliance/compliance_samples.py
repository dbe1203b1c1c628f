"""The portraits the compliance gate must never refuse (every evaluation photo, skimage's portraits), and a stand-in
for the detector's raw output: refusal paths are tested by what the network answers, never with such a photo."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from deployments.common.image import decode_image
from deployments.compliance.nudenet import INPUT_SIZE, LABELS

EVAL_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


def eval_photos(shared_dir: Path) -> dict[str, np.ndarray]:
    """Every image under ``../shared/eval``, decoded as the service decodes an upload."""
    folder = shared_dir / "eval"
    return {
        str(path.relative_to(folder)): decode_image(path.read_bytes()).rgb
        for path in sorted(folder.rglob("*"))
        if path.suffix.lower() in EVAL_SUFFIXES
    }


def skimage_portraits() -> dict[str, np.ndarray]:
    """skimage.data's photos of people: the astronaut (colour) and the cameraman (gray, as RGB)."""
    from skimage import data

    return {
        "skimage:astronaut": np.ascontiguousarray(data.astronaut()),
        "skimage:camera": np.ascontiguousarray(np.dstack([data.camera()] * 3)),
    }


def stand_in_output(findings: list[tuple[str, float, tuple[float, float, float, float]]], anchors: int = 2100):
    """A raw output ``(22, anchors)`` holding ``findings`` (class, score, box ``(cx, cy, w, h)`` in 320-pixel
    units), every other column empty."""
    output = np.zeros((4 + len(LABELS), anchors), np.float32)
    for column, (label, score, box) in enumerate(findings):
        output[:4, column] = box
        output[4 + LABELS.index(label), column] = score
    return output


CENTRE = (INPUT_SIZE / 2, INPUT_SIZE / 2, 80.0, 80.0)
