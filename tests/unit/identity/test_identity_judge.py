"""The identity judge: the same person stays the same person through what photos go through, two people are told
apart, every face a restore changes says how far it moved, and ``min_identity`` turns a face that moved too far into
a 422 ``identity_changed``."""

from __future__ import annotations

import asyncio
import base64
import json

import cv2
import numpy as np
import pytest
from fastapi.testclient import TestClient

from deployments.common.engine import EngineInfo
from deployments.common.errors import IdentityChanged, InternalError, ModelUnavailable
from deployments.common.image import encode_image
from deployments.common.weights import ModelStore, load_manifest
from deployments.identity.predictor import DLIB_THRESHOLD
from deployments.identity.types import FaceEmbedding, Judge
from deployments.identity.verdict import compare
from deployments.restore.types import RESTORE_FACE, RestoredFace
from serve_app.backend import Backend
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.local_backend import in_process_backend
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def backend(builtin_store) -> Backend:
    return in_process_backend(ModelStore(str(builtin_store), load_manifest(REPO_ROOT / "configs" / "models.yaml")))


@pytest.fixture(scope="module")
def portrait(astronaut_rgb) -> np.ndarray:
    return np.ascontiguousarray(astronaut_rgb[:300, 80:380])


def jpeg(rgb: np.ndarray, quality: int = 92) -> bytes:
    return encode_image(rgb, "jpeg", quality=quality)


def identity_of(backend: Backend, image: np.ndarray, reference: np.ndarray) -> dict:
    context = job_context(Settings())
    params = parse_job_params("identity", {"reference_b64": base64.b64encode(jpeg(reference)).decode()}, context)
    result = asyncio.run(run_job(backend, "identity", jpeg(image), params, context))
    assert result.media_type == "application/json"
    return json.loads(result.body)


def test_the_same_person_through_compression_blur_and_a_mirror_is_judged_the_same(backend, portrait):
    ok, encoded = cv2.imencode(".jpg", portrait[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 30])
    variants = {
        "jpeg30": cv2.imdecode(encoded, cv2.IMREAD_COLOR)[:, :, ::-1],
        "blur": cv2.GaussianBlur(portrait, (0, 0), 2.0),
        "mirror": portrait[:, ::-1],
        "gray": np.repeat(cv2.cvtColor(portrait, cv2.COLOR_RGB2GRAY)[:, :, None], 3, axis=2),
    }
    for name, variant in variants.items():
        answer = identity_of(backend, np.ascontiguousarray(variant), portrait)
        assert answer["same_person"], (name, answer)
        assert answer["judge"] == "dlib" and answer["threshold"] == DLIB_THRESHOLD


@pytest.mark.eval
def test_two_eval_people_are_told_apart(backend, shared_dir):
    faces = sorted((shared_dir / "eval" / "faces").glob("*.png"))[:3]
    photos = [cv2.imread(str(path))[:, :, ::-1] for path in faces]
    answer = identity_of(backend, np.ascontiguousarray(photos[0]), np.ascontiguousarray(photos[1]))
    assert not answer["same_person"], answer


def test_post_v1_identity_answers_json_naming_the_judge(backend, portrait):
    app = create_api()
    app.state.backend = backend
    app.state.settings = Settings()
    client = TestClient(app)
    reference = base64.b64encode(jpeg(portrait)).decode()
    answer = client.post("/v1/identity", json={"image_b64": reference, "reference_b64": reference})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["same_person"] is True and body["similarity"] > 0.99
    assert body["judge"] == "dlib" and body["face"] == 0 and body["reference_face"] == 0
    with_meta = client.post("/v1/identity", json={"image_b64": reference, "reference_b64": reference, "return": "json"})
    assert with_meta.json()["meta"]["job"] == "identity" and "image_b64" not in with_meta.json()


def test_a_photo_without_a_face_is_a_422_naming_which(backend, portrait):
    context = job_context(Settings())
    blank = np.full((200, 200, 3), 128, np.uint8)
    params = parse_job_params("identity", {"reference_b64": base64.b64encode(jpeg(blank)).decode()}, context)
    with pytest.raises(Exception, match="no face found in the reference"):
        asyncio.run(run_job(backend, "identity", jpeg(portrait), params, context))


def restore_json(backend: Backend, photo: bytes, **options) -> dict:
    context = job_context(Settings())
    params = parse_job_params("restore", {"return": "json", **options}, context)
    return asyncio.run(run_job(backend, "restore", photo, params, context))


def test_restore_reports_each_faces_identity_and_the_lowest(backend, portrait):
    result = restore_json(backend, jpeg(portrait))
    (face,) = result.attachments["faces"]
    assert face["identity"]["same_person"] and face["identity"]["judge"] == "dlib"
    assert result.meta.identity == {"face": 0, **face["identity"]}
    assert result.headers()["X-Portrait-Identity"].endswith("judge=dlib; same_person")


class AnotherPerson(Backend):
    """A restorer that returns someone else: the face crop replaced by a blank grey one."""

    def __init__(self, backend: Backend) -> None:
        super().__init__(backend.transport, backend.context)
        self._real = backend

    async def call(self, call, *args, **options):
        restored = await self._real.call(call, *args, **options)
        if call.method == RESTORE_FACE.method and call.batched:
            return RestoredFace(np.full_like(restored.crop, 128), restored.engine)
        return restored


def test_a_restorer_that_returns_someone_else_is_refused_under_min_identity(backend, portrait):
    with pytest.raises(IdentityChanged) as refused:
        restore_json(AnotherPerson(backend), jpeg(portrait), min_identity="0.7")
    assert refused.value.http_status == 422 and refused.value.details["face"] == 0
    reported = restore_json(AnotherPerson(backend), jpeg(portrait))  # without a bar: reported, not refused
    assert reported.meta.identity["same_person"] is False


def test_without_the_judges_weights_restore_still_answers_and_says_why(tmp_path, builtin_store, portrait):
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    store_root = tmp_path / "models"
    for folder in ("mediapipe", "mtcnn"):
        if (builtin_store / folder).exists():
            (store_root / folder).parent.mkdir(parents=True, exist_ok=True)
            (store_root / folder).symlink_to(builtin_store / folder)
    bare = in_process_backend(ModelStore(str(store_root), manifest))
    result = restore_json(bare, jpeg(portrait))
    assert "portrait models pull" in result.meta.identity["unavailable"]
    with pytest.raises(ModelUnavailable):
        restore_json(bare, jpeg(portrait), min_identity="0.5")


def test_two_judges_embeddings_never_compare():
    info = EngineInfo("x", neural=True)
    dlib, sface = Judge("dlib", 0.7, info), Judge("sface", 0.363, info)
    vector = np.ones(128, np.float32)
    assert compare(FaceEmbedding(vector, sface), FaceEmbedding(vector * 2, sface)).similarity == pytest.approx(1.0)
    assert compare(FaceEmbedding(vector, dlib), FaceEmbedding(vector, dlib)).similarity == pytest.approx(1.0)
    with pytest.raises(InternalError):
        compare(FaceEmbedding(vector, dlib), FaceEmbedding(vector, sface))
