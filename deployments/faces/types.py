"""Records that describe the faces found in one image (image contract: see ``deployments``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from deployments.common.affine import apply_affine
from deployments.common.stage import StageCall


@dataclass(frozen=True, eq=False)
class Face:
    """One face in original-image pixel coordinates (after EXIF orientation).

    ``landmarks`` is a ``(5, 2)`` float32 array in the order used by GPEN/facexlib templates:
    image-left eye centre, image-right eye centre, nose tip, image-left mouth corner, image-right mouth corner.
    ``roll_deg`` is the eye-line angle, positive when the image-right eye is lower (clockwise tilt on screen).
    ``mesh`` holds the 468 face-mesh points ``(468, 2)`` when the mesh ran and was confident, else ``None``.
    ``mesh_score`` is the mesh's face-flag probability; below the analyzer's threshold the landmarks come from the
    detector's keypoints instead (less precise: about 15 % of the eye distance on a JPEG q10 photo).
    """

    box: tuple[float, float, float, float]
    score: float
    landmarks: np.ndarray
    roll_deg: float
    chin: tuple[float, float]
    mesh: np.ndarray | None = field(default=None, repr=False)
    mesh_score: float = 0.0

    @property
    def eye_distance_px(self) -> float:
        return float(np.linalg.norm(self.landmarks[1] - self.landmarks[0]))

    def moved(self, affine: np.ndarray) -> Face:
        """The same face in another image's pixels (``affine``: 2x3, this image → that one): a crop, a canvas."""
        corners = np.array([self.box[:2], (self.box[2], self.box[1]), self.box[2:], (self.box[0], self.box[3])], float)
        mapped = apply_affine(affine, corners)
        (x0, y0), (x1, y1) = mapped.min(axis=0), mapped.max(axis=0)
        landmarks = apply_affine(affine, np.asarray(self.landmarks, float)).astype(np.float32)
        (chin,) = apply_affine(affine, np.array([self.chin], float))
        eyes = landmarks[1] - landmarks[0]
        mesh = None if self.mesh is None else apply_affine(affine, np.asarray(self.mesh, float)).astype(np.float32)
        return Face(
            (float(x0), float(y0), float(x1), float(y1)),
            self.score,
            landmarks,
            float(np.degrees(np.arctan2(eyes[1], eyes[0]))),
            (float(chin[0]), float(chin[1])),
            mesh,
            self.mesh_score,
        )

    def to_json(self) -> dict:
        return {
            "box": [round(float(v), 2) for v in self.box],
            "score": round(float(self.score), 4),
            "landmarks": [[round(float(x), 2), round(float(y), 2)] for x, y in self.landmarks],
            "roll_deg": round(float(self.roll_deg), 2),
            "chin": [round(float(self.chin[0]), 2), round(float(self.chin[1]), 2)],
        }


FACE_ANALYZER = "FaceAnalyzer"
# Every face of a whole photo (image contract: HxWx3 uint8 RGB), biggest first.
ANALYZE_FACES: StageCall[np.ndarray, list[Face]] = StageCall(FACE_ANALYZER, "analyze_batch")
