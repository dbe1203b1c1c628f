"""Every job route in-process: the FastAPI app over the local backend (no Ray), asserting whole bodies and headers."""

from __future__ import annotations

import base64
import io

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from deployments.common.errors import InternalError
from serve_app.jobs.results import JobResult
from serve_app.routes import create_api
from serve_app.settings import Settings
from tests.stage_doubles import FaceAnalysisDouble


class BrokenAnalyzer(FaceAnalysisDouble):
    """The local backend with a bug in face analysis: ``error`` on every call."""

    def __init__(self, backend, error: Exception) -> None:
        super().__init__(backend)
        self._error = error

    async def analyze_faces(self, image):
        raise self._error


def client_for(backend, settings: Settings | None = None) -> TestClient:
    app = create_api()
    app.state.backend = backend
    app.state.settings = settings or Settings()
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture(scope="module")
def client(local_backend) -> TestClient:
    return client_for(local_backend)


def image_of(body: bytes) -> Image.Image:
    return Image.open(io.BytesIO(body))


def test_faces_lists_the_one_face_with_its_landmarks(client, photo_jpeg):
    answer = client.post("/v1/faces", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["width"], body["height"], body["engine"]) == (256, 256, "mediapipe-blazeface+face-mesh")
    (face,) = body["faces"]
    assert set(face) == {"box", "score", "landmarks", "roll_deg", "chin"} and len(face["landmarks"]) == 5
    assert set(body["timings_ms"]) == {"decode", "analyze"}


def test_restore_answers_image_bytes_and_names_the_engine(client, photo_jpeg):
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"upscale": "2"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/jpeg"
    assert (answer.headers["x-portrait-engine"], answer.headers["x-portrait-faces"]) == ("classic-restore", "1")
    assert answer.headers["x-portrait-weights"] == "none"
    assert image_of(answer.content).size == (512, 512)


def test_restore_as_json_carries_the_crops_and_the_metadata(client, photo_jpeg):
    answer = client.post("/v1/restore", json={"image_b64": base64.b64encode(photo_jpeg).decode(), "return": "json"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"image_b64", "media_type", "meta", "faces"}
    meta = body["meta"]
    assert (meta["job"], meta["engine"], meta["faces"], meta["weights"]) == ("restore", "classic-restore", 1, [])
    assert meta["params"]["model"] == "gfpgan-v1.4" and meta["params"]["return"] == "json"
    (face,) = body["faces"]
    assert image_of(base64.b64decode(face["after_png_b64"])).size == (512, 512)


def test_idphoto_meets_the_standard_and_reports_compliance(client, photo_jpeg):
    answer = client.post(
        "/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"spec": "cn-1inch"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "image/jpeg"
    photo = image_of(answer.content)
    assert photo.size == (295, 413) and photo.info["dpi"] == pytest.approx((300, 300), abs=0.5)
    # A 256 px source is too small for a 1-inch photo at 300 DPI: the header says what the report's checks say.
    report = client.post(
        "/v1/idphoto",
        files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
        data={"spec": "cn-1inch", "return": "json"},
    ).json()["report"]
    failing = {check["name"] for check in report["checks"] if not check["passed"]}
    assert "source_scale" in failing
    assert answer.headers["x-portrait-compliance"] == report["verdict"] == "fail"


def test_cartoon_and_its_compatibility_route_answer_png(client, photo_jpeg):
    for route in ("/v1/cartoon", "/api/cartoon"):
        answer = client.post(route, files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "image/png"
        assert image_of(answer.content).size == (256, 256)


def test_an_unknown_option_is_the_callers_fault_and_named(client, photo_jpeg):
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"colour": "red"})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "invalid_parameter" and "colour" in answer.json()["error"]["message"]


def test_a_corrupt_upload_is_a_400(client, photo_jpeg):
    answer = client.post("/v1/cartoon", files={"image": ("me.jpg", photo_jpeg[:200], "image/jpeg")})
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "corrupt_image"


@pytest.mark.parametrize(
    "bug", [InternalError("landmarks out of order"), KeyError("landmarks")], ids=["typed", "untyped"]
)
def test_our_own_bug_is_a_500_with_a_request_id_never_the_callers_fault(local_backend, photo_jpeg, bug):
    client = client_for(BrokenAnalyzer(local_backend, bug))
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 500
    error = answer.json()["error"]
    assert error["code"] == "internal_error"
    assert error["request_id"] == answer.headers["x-request-id"] and len(error["request_id"]) == 32
    served = client.post(
        "/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, headers={"X-Request-Id": "from-serve"}
    )
    assert served.json()["error"]["request_id"] == "from-serve"


def test_standards_and_styles_are_listed(client):
    specs = client.get("/v1/idphoto/specs").json()["specs"]
    assert "cn-1inch" in {spec["slug"] for spec in specs}
    styles = client.get("/v1/cartoon/styles").json()["styles"]
    assert {style["name"] for style in styles} >= {"anime", "3d", "handdrawn", "sketch"}


def test_a_json_answer_reads_back_whole_print_sheet_included(client, photo_jpeg):
    answer = client.post(
        "/v1/idphoto",
        files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
        data={"layout": "6inch", "return": "json"},
    )
    assert answer.status_code == 200, answer.text
    result = JobResult.from_json(answer.json())
    assert result.sheet is not None and image_of(result.sheet).size[0] > 1000
    assert result.to_json() == answer.json()


def test_a_json_answer_carries_the_hd_copy_and_reads_back_whole(client, photo_jpeg):
    answer = client.post(
        "/v1/idphoto",
        files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
        data={"hd": "true", "brightness_strength": "10", "return": "json"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    hd = image_of(base64.b64decode(body["hd_b64"]))
    assert body["hd_media_type"] == "image/jpeg" and "sheet_b64" not in body
    assert body["hd"] == {
        "width": hd.size[0],
        "height": hd.size[1],
        "dpi": pytest.approx(hd.info["dpi"][0], abs=0.5),
        "bytes": len(base64.b64decode(body["hd_b64"])),
    }
    assert min(hd.size) >= 600 and abs(hd.size[0] / hd.size[1] - 295 / 413) < 0.003
    result = JobResult.from_json(body)
    assert result.hd is not None and result.sheet is None
    assert result.to_json() == body


def test_a_bad_touch_up_value_is_a_422_naming_the_field(client, photo_jpeg):
    answer = client.post(
        "/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"sharpen_strength": "9"}
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_parameter" and error["message"].startswith("sharpen_strength:")


def test_a_background_picture_sent_as_a_file_is_a_422_naming_the_field_not_ignored(client, photo_jpeg):
    files = {"image": ("me.jpg", photo_jpeg, "image/jpeg"), "background_image": ("bg.jpg", photo_jpeg, "image/jpeg")}
    answer = client.post("/v1/idphoto", files=files)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert (error["code"], error["details"]) == ("invalid_parameter", {"field": "background_image"})
    assert error["message"] == "background_image: a file is read only from field 'image'; options are text fields"


@pytest.mark.parametrize("model", ["gfpgan-v1.4", "codeformer", "gpen-bfr-512", "gpen-bfr-256"])
@pytest.mark.parametrize("upscale", [2, 4])
def test_every_restore_model_and_upscale_answers_and_names_its_engines(client, photo_jpeg, model, upscale):
    fields = {"model": model, "upscale": str(upscale), "return": "json"}
    if model == "codeformer":
        fields["fidelity"] = "0.3"
    answer = client.post("/v1/restore", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data=fields)
    assert answer.status_code == 200, answer.text
    meta = answer.json()["meta"]
    # No weights in the test store: the classic face engine, and Lanczos (no engine entry) for the background.
    assert (meta["engine"], meta["weights"], meta["params"]["model"]) == ("classic-restore", [], model)
    assert (meta["width"], meta["height"]) == (256 * upscale, 256 * upscale)
    assert answer.json()["faces"][0]["after_png_b64"]


def test_fidelity_with_another_model_is_refused(client, photo_jpeg):
    answer = client.post(
        "/v1/restore",
        files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
        data={"model": "gfpgan-v1.4", "fidelity": "0.3"},
    )
    assert answer.status_code == 422
    assert "fidelity applies to model codeformer only" in answer.json()["error"]["message"]


def test_healthz_names_the_non_neural_engines_and_the_command_that_fixes_them(local_backend):
    class Reporting:
        def __getattr__(self, name):
            return getattr(local_backend, name)

        async def health(self):
            restorer = {"status": "degraded", "engine": "classic-restore"}
            return {
                "FaceRestorerGFPGAN": {**restorer, "models": [{"name": "gfpgan-v1.4", "fix": "x"}]},
                "FaceRestorer512": {**restorer, "models": [{"name": "gpen-bfr-512", "fix": "y"}]},
                "FaceAnalyzer": {"status": "ok", "engine": "mediapipe", "models": [{"name": "face-mesh", "fix": None}]},
            }

    body = client_for(Reporting(), Settings(public_health_detail=True)).get("/healthz").json()
    assert body["fallbacks"] == [
        {
            "deployment": "FaceRestorerGFPGAN",
            "engine": "classic-restore",
            "missing_models": ["gfpgan-v1.4"],
            "fix": "portrait models pull gfpgan-v1.4",
        },
        {
            "deployment": "FaceRestorer512",
            "engine": "classic-restore",
            "missing_models": ["gpen-bfr-512"],
            "fix": "portrait models pull gpen-bfr-512",
        },
    ]
    assert body["fix"] == "portrait models pull gfpgan-v1.4 gpen-bfr-512"


@pytest.mark.parametrize(
    ("headers", "data", "lang"),
    [
        ({"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}, {}, "zh"),
        ({"Accept-Language": "en-US,en;q=0.9,zh;q=0.5"}, {}, "en"),
        ({"Accept-Language": "zh-CN"}, {"lang": "en"}, "en"),
        ({}, {"lang": "zh-Hans"}, "zh"),
        ({}, {}, "en"),
    ],
)
def test_idphoto_report_speaks_the_callers_language(client, photo_jpeg, headers, data, lang):
    """No 1-inch photo fits in 1 KB: the size reason comes in the caller's language (Accept-Language or lang)."""
    answer = client.post(
        "/v1/idphoto",
        files={"image": ("me.jpg", photo_jpeg, "image/jpeg")},
        data={"spec": "cn-1inch", "max_kb": "1", "return": "json", **data},
        headers=headers,
    )
    assert answer.status_code == 200, answer.text
    report = answer.json()["meta"]["report"]
    assert report["lang"] == lang and "file_size" in report["reason_codes"]
    reason = report["reasons"][report["reason_codes"].index("file_size")]
    assert reason.startswith("文件大小" if lang == "zh" else "file size"), reason


def test_idphoto_refuses_an_unknown_language(client, photo_jpeg):
    answer = client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")}, data={"lang": "fr"})
    assert answer.status_code == 422 and "lang" in answer.text, answer.text
