"""Face analysis: detection, then landmarks, for whole photos (image contract: HxWx3 uint8 RGB)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from deployments.common.admission import MIN_PHOTO_SIDE_PX, PHOTO_STAGE_INPUT
from deployments.common.errors import InvalidParameter
from deployments.common.image import PROBE_IMAGE, require_image
from deployments.common.weights import ModelStatus, ModelStore
from deployments.faces.detect import DetectionParams, FaceDetector
from deployments.faces.landmarks import FaceMesh
from deployments.faces.types import Face

logger = logging.getLogger(__name__)

FACE_MODELS = ("face-detect-short", "face-detect-full", "face-mesh")
MTCNN_MODELS = ("mtcnn-pnet", "mtcnn-rnet", "mtcnn-onet")


@dataclass(frozen=True)
class FaceAnalysisConfig(DetectionParams):
    """Tunables of one analyzer (a Serve ``user_config`` maps onto this): the detection knobs of
    :class:`DetectionParams` (declared there once) plus ``mesh_threshold``, the face-mesh confidence below which
    detector keypoints replace the mesh, ``max_faces`` and ``num_threads``.
    """

    mesh_threshold: float = 0.5
    max_faces: int = 64
    num_threads: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.mesh_threshold <= 1.0:
            raise InvalidParameter(f"mesh_threshold must be in [0, 1], got {self.mesh_threshold}")
        if self.max_faces < 1 or self.num_threads < 1:
            raise InvalidParameter("max_faces and num_threads must be positive")


class FaceAnalysisPredictor:
    """Finds every face with its five landmarks. Holds the models and the frozen config only, so one predictor serves
    many threads (each thread gets its own interpreters).

    ``models_dir`` holds the MediaPipe models; ``mtcnn_dir``, when given, MTCNN's (small faces of group photos).
    """

    def __init__(
        self,
        models_dir: Path | str,
        config: FaceAnalysisConfig = FaceAnalysisConfig(),
        *,
        mtcnn_dir: Path | str | None = None,
        models: Sequence[ModelStatus] = (),
    ) -> None:
        self.config = config
        self.models = tuple(models)
        self.detector = FaceDetector(models_dir, num_threads=config.num_threads, mtcnn_dir=mtcnn_dir)
        self.mesh = FaceMesh(models_dir, num_threads=config.num_threads)

    @classmethod
    def from_store(cls, store: ModelStore, config: FaceAnalysisConfig = FaceAnalysisConfig()) -> FaceAnalysisPredictor:
        """The built-in models from the store; MTCNN only when all three of its files are there (without it the
        small-face pass of group photos is off: BlazeFace alone, at its main threshold)."""
        mtcnn_paths = [store.find(name) for name in MTCNN_MODELS]
        mtcnn_dir = mtcnn_paths[0].parent if all(mtcnn_paths) else None
        if mtcnn_dir is None:
            logger.warning("MTCNN weights absent (%s): small faces of group photos are searched less", MTCNN_MODELS)
        statuses = [store.status(name) for name in FACE_MODELS + MTCNN_MODELS]
        return cls(store.resolve(FACE_MODELS[0]).parent, config, mtcnn_dir=mtcnn_dir, models=statuses)

    def probe(self) -> None:
        """The interpreters answer (a blank image has no face)."""
        self.analyze(PROBE_IMAGE)

    def health(self) -> dict[str, Any]:
        return {
            "status": "ok",
            "engine": self.models[0].spec.engine if self.models else "mediapipe",
            "models": [status.to_json() for status in self.models],
        }

    def admit(self, image_rgb: np.ndarray) -> None:
        """Refuse an image this stage must not run (``admission``): not the image contract, under 8 px a side (the
        detectors' smallest input), or over the whole-photo cap."""
        require_image(image_rgb, what="face analysis input", min_side_px=MIN_PHOTO_SIDE_PX)
        PHOTO_STAGE_INPUT.admit_image(image_rgb)

    def analyze(self, image_rgb: np.ndarray) -> list[Face]:
        """Faces sorted by box area, largest first (the main subject leads); ``[]`` when there is none."""
        self.admit(image_rgb)
        image_rgb = np.ascontiguousarray(image_rgb)
        detections = self.detector.detect(image_rgb, self.config)
        faces = []
        for detection in detections[: self.config.max_faces]:
            marks = self.mesh.locate(image_rgb, detection, mesh_threshold=self.config.mesh_threshold)
            x0, y0, x1, y1 = (float(v) for v in detection.box)
            faces.append(
                Face(
                    box=(x0, y0, x1, y1),
                    score=detection.score,
                    landmarks=marks.points,
                    roll_deg=marks.roll_deg,
                    chin=marks.chin,
                    mesh=marks.mesh,
                    mesh_score=marks.mesh_score,
                )
            )
        if len(detections) > self.config.max_faces:
            logger.info("%d faces found, kept the %d most confident", len(detections), self.config.max_faces)
        faces.sort(key=lambda f: (f.box[2] - f.box[0]) * (f.box[3] - f.box[1]), reverse=True)
        return faces

    def analyze_batch(self, images_rgb: Sequence[np.ndarray]) -> list[list[Face]]:
        """One face list per image, in order."""
        return [self.analyze(image) for image in images_rgb]
