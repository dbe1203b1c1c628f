"""Face mesh (MediaPipe ``face_landmark.tflite``, 468 points) on each detection, reduced to the 5 alignment points.

The mesh is far steadier than the detector's keypoints (4 % vs 13–15 % of the eye distance under JPEG q10), so it is
the source of ``Face.landmarks``; when its face flag says it is unsure (occluded eyes, profile), the detector's own
keypoints are used instead. All points are original-image pixel-index coordinates.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from deployments.common.affine import apply_affine, eye_roll_deg, invert_affine
from deployments.faces.detection import Detection
from deployments.faces.tflite import TfliteModel

logger = logging.getLogger(__name__)

MESH_FILENAME = "face_landmark.tflite"
MESH_INPUT_PX = 192
MESH_ROI_SCALE = 1.5  # MediaPipe's face_landmark ROI: the detection box enlarged 1.5x, square, rotated upright

# Mesh indices (MediaPipe canonical face mesh); "first"/"second" eye are sorted to image-left/right afterwards.
EYE_CONTOURS = (
    (33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173),
    (263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398),
)
NOSE_TIP = 1
MOUTH_CORNERS = (61, 291)
CHIN = 152

# GPEN/ArcFace 96x112 reference: mouth width is 0.83 of the eye distance; the chin sits about 0.75 eye-to-mouth
# heights below the mouth centre. Used only to complete the detector's 4 keypoints when the mesh is unsure.
MOUTH_WIDTH_PER_EYE_DISTANCE = 0.83
CHIN_BELOW_MOUTH_PER_EYE_TO_MOUTH = 0.75


@dataclass(frozen=True, eq=False)
class FaceLandmarks:
    """Five points (image-left eye, image-right eye, nose tip, image-left / image-right mouth corner), roll, chin."""

    points: np.ndarray
    roll_deg: float
    chin: tuple[float, float]
    mesh: np.ndarray | None
    mesh_score: float


def mesh_roi_matrix(detection: Detection) -> np.ndarray:
    """2x3 image->mesh-input map: box centre to the input centre, eye line horizontal, 1.5x the box side."""
    eyes = _sorted_eyes(detection.keypoints[0], detection.keypoints[1])
    roll = eye_roll_deg(*eyes)
    box = detection.box
    centre = ((box[0] + box[2]) / 2.0, (box[1] + box[3]) / 2.0)
    side_px = max(box[2] - box[0], box[3] - box[1]) * MESH_ROI_SCALE
    matrix = cv2.getRotationMatrix2D((float(centre[0]), float(centre[1])), roll, MESH_INPUT_PX / max(side_px, 1e-3))
    matrix[:, 2] += (MESH_INPUT_PX - 1) / 2.0 - np.array(centre)
    return matrix


def _sorted_eyes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (a, b) if a[0] <= b[0] else (b, a)


class FaceMesh:
    """The face-mesh model; holds the model only."""

    def __init__(self, models_dir: Path | str, *, num_threads: int = 1) -> None:
        self.model = TfliteModel(Path(models_dir) / MESH_FILENAME, num_threads=num_threads)

    def locate(self, image_rgb: np.ndarray, detection: Detection, *, mesh_threshold: float) -> FaceLandmarks:
        """Landmarks of one detected face; the detector's keypoints when the mesh's face flag is below threshold."""
        to_crop = mesh_roi_matrix(detection)
        crop = cv2.warpAffine(
            image_rgb, to_crop, (MESH_INPUT_PX, MESH_INPUT_PX), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        raw_points, flag = self.model.run(crop.astype(np.float32)[None] * (1.0 / 255.0))
        mesh_score = float(1.0 / (1.0 + math.exp(-float(np.clip(flag.ravel()[0], -80.0, 80.0)))))
        if mesh_score < mesh_threshold:
            logger.debug("face mesh unsure (%.2f): detector keypoints used", mesh_score)
            return landmarks_from_detection(detection, mesh_score)
        crop_points = raw_points.reshape(-1, 3)[:, :2] - 0.5  # continuous input px -> pixel index
        mesh = apply_affine(invert_affine(to_crop), crop_points).astype(np.float32)
        return landmarks_from_mesh(mesh, crop_points, mesh_score)


def landmarks_from_mesh(mesh: np.ndarray, upright_mesh: np.ndarray, mesh_score: float) -> FaceLandmarks:
    """Reduce 468 points to 5; left/right are decided in the upright crop frame so a tilted face keeps its order."""
    eyes = [mesh[list(idx)].mean(axis=0) for idx in EYE_CONTOURS]
    upright_eye_x = [upright_mesh[list(idx), 0].mean() for idx in EYE_CONTOURS]
    if upright_eye_x[0] > upright_eye_x[1]:
        eyes.reverse()
    mouth = [mesh[i] for i in MOUTH_CORNERS]
    if upright_mesh[MOUTH_CORNERS[0], 0] > upright_mesh[MOUTH_CORNERS[1], 0]:
        mouth.reverse()
    points = np.stack([eyes[0], eyes[1], mesh[NOSE_TIP], mouth[0], mouth[1]]).astype(np.float32)
    chin = (float(mesh[CHIN, 0]), float(mesh[CHIN, 1]))
    return FaceLandmarks(points, eye_roll_deg(points[0], points[1]), chin, mesh, mesh_score)


def landmarks_from_detection(detection: Detection, mesh_score: float) -> FaceLandmarks:
    """Five points from the detector: its eyes and nose, mouth corners spread along the eye line from the mouth
    centre, chin extrapolated below the mouth (template proportions)."""
    left_eye, right_eye = _sorted_eyes(detection.keypoints[0], detection.keypoints[1])
    nose, mouth_centre = detection.keypoints[2], detection.keypoints[3]
    half_mouth = (right_eye - left_eye) * (MOUTH_WIDTH_PER_EYE_DISTANCE / 2.0)
    points = np.stack([left_eye, right_eye, nose, mouth_centre - half_mouth, mouth_centre + half_mouth])
    chin = mouth_centre + (mouth_centre - (left_eye + right_eye) / 2.0) * CHIN_BELOW_MOUTH_PER_EYE_TO_MOUTH
    return FaceLandmarks(
        points.astype(np.float32), eye_roll_deg(left_eye, right_eye), (float(chin[0]), float(chin[1])), None, mesh_score
    )
