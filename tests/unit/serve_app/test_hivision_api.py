"""HivisionIDPhotos' API at its paths: its docs' curl and Python examples (docs/api_EN.md), as TestClient calls on the
local backend, answered in its response shape; and the errors we give where its server would crash."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from deployments.common.image import encode_image
from tests.unit.serve_app.test_job_routes import client_for

MATTING_NOTE = {"asked": "modnet_photographic_portrait_matting", "used": "the same MODNet weights"}
MTCNN_NOTE = {
    "asked": "mtcnn",
    "used": "our face analyzer (BlazeFace + face mesh: finds the same faces, adds the landmarks framing needs)",
}


@pytest.fixture(scope="module")
def client(local_backend):
    return client_for(local_backend)


def decoded(data_url: str, media_type: str = "image/png") -> Image.Image:
    prefix = f"data:{media_type};base64,"
    assert data_url.startswith(prefix)
    return Image.open(io.BytesIO(base64.b64decode(data_url[len(prefix) :])))


@pytest.fixture(scope="module")
def idphoto_answer(client, photo_jpeg) -> dict:
    """Its docs' curl example for /idphoto (the documented `face_alignment`, which its code does not read)."""
    answer = client.post(
        "/idphoto",
        files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
        data={
            "height": "413",
            "width": "295",
            "human_matting_model": "modnet_photographic_portrait_matting",
            "face_detect_model": "mtcnn",
            "hd": "true",
            "dpi": "300",
            "face_alignment": "true",
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.fixture(scope="module")
def matted_png(client, photo_jpeg) -> bytes:
    """Its docs' curl example for /human_matting: the person of the whole photo on nothing."""
    answer = client.post(
        "/human_matting",
        files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
        data={"human_matting_model": "modnet_photographic_portrait_matting", "dpi": "300"},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"status", "image_base64", "models"} and body["status"] is True
    assert body["models"] == {"human_matting_model": MATTING_NOTE}
    return base64.b64decode(body["image_base64"].partition(",")[2])


def test_idphoto_answers_a_transparent_standard_and_hd_photo_and_says_what_it_ignored(idphoto_answer):
    body = idphoto_answer
    assert set(body) == {"status", "image_base64_standard", "image_base64_hd", "report", "models", "ignored_fields"}
    assert body["status"] is True and body["ignored_fields"] == ["face_alignment"]
    assert body["models"] == {"human_matting_model": MATTING_NOTE, "face_detect_model": MTCNN_NOTE}
    standard = decoded(body["image_base64_standard"])
    assert (standard.size, standard.mode) == ((295, 413), "RGBA")
    assert standard.info["dpi"] == pytest.approx((300, 300), abs=0.5)
    alpha = np.asarray(standard)[..., 3]
    assert alpha[0, 0] == 0 and alpha[300, 147] == 255  # background corner clear, the body (below the chin) opaque
    hd = decoded(body["image_base64_hd"])
    # The same crop at the spec's aspect ratio, short side at least 600 px (a 256 px source has no more detail).
    assert (hd.size, hd.mode) == ((600, 840), "RGBA")
    assert body["report"]["spec"]["width_px"] == 295


def test_idphoto_python_example_with_every_field_and_no_hd(client, photo_jpeg):
    data = {
        "height": 413,
        "width": 295,
        "human_matting_model": "modnet_photographic_portrait_matting",
        "face_detect_model": "mtcnn",
        "hd": False,
        "dpi": 300,
        "face_align": True,
        "head_measure_ratio": 0.2,
        "head_height_ratio": 0.45,
        "top_distance_max": 0.12,
        "top_distance_min": 0.1,
        "brightness_strength": 0,
        "contrast_strength": 0,
        "sharpen_strength": 0,
        "saturation_strength": 0,
    }
    answer = client.post(
        "/idphoto",
        files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
        data={k: str(v) for k, v in data.items()},
    )
    body = answer.json()
    assert answer.status_code == 200 and body["status"] is True
    assert set(body) == {"status", "image_base64_standard", "report", "models"}


def test_a_base64_upload_keeps_red_and_blue_where_they_are(client, photo_jpeg, idphoto_answer):
    """Its server swaps red and blue for `input_image_base64`; ours reads the same pixels as from a file."""
    encoded = "data:image/jpeg;base64," + base64.b64encode(photo_jpeg).decode("ascii")
    answer = client.post("/idphoto", data={"input_image_base64": encoded, "face_alignment": "true"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["image_base64_standard"] == idphoto_answer["image_base64_standard"]


def test_add_background_curl_example_gives_a_jpeg_of_at_most_kb(client, idphoto_answer):
    standard = base64.b64decode(idphoto_answer["image_base64_standard"].partition(",")[2])
    answer = client.post(
        "/add_background",
        files={"input_image": ("test.png", standard, "image/png")},
        data={"color": "638cce", "kb": "200", "render": "0", "dpi": "300"},
    )
    body = answer.json()
    assert answer.status_code == 200 and set(body) == {"status", "image_base64", "kb"}
    photo = decoded(body["image_base64"], "image/jpeg")
    assert photo.size == (295, 413) and body["kb"]["size_kb"] <= 200 and body["kb"]["asked"] == 200
    assert np.abs(np.asarray(photo)[2, 2].astype(int) - (0x63, 0x8C, 0xCE)).max() <= 3


def test_add_background_python_example_without_kb_gives_a_png_of_the_exact_colour(client, idphoto_answer):
    standard = base64.b64decode(idphoto_answer["image_base64_standard"].partition(",")[2])
    answer = client.post(
        "/add_background",
        files={"input_image": ("test.png", standard, "image/png")},
        data={"color": "638cce", "render": "0", "dpi": "300"},
    )
    body = answer.json()
    assert answer.status_code == 200 and set(body) == {"status", "image_base64"}
    photo = np.asarray(decoded(body["image_base64"]))
    assert photo.shape == (413, 295, 3) and tuple(photo[2, 2]) == (0x63, 0x8C, 0xCE)


def test_generate_layout_photos_examples_give_a_six_inch_sheet(client, photo_jpeg):
    photo = encode_image(np.full((413, 295, 3), 90, dtype=np.uint8), "jpeg")
    for kb, media_type in (("200", "image/jpeg"), ("", "image/png")):
        answer = client.post(
            "/generate_layout_photos",
            files={"input_image": ("test.jpg", photo, "image/jpeg")},
            data={"height": "413", "width": "295", "kb": kb, "dpi": "300"},
        )
        body = answer.json()
        assert answer.status_code == 200 and body["status"] is True
        sheet = decoded(body["image_base64"], media_type)
        assert sorted(sheet.size) == [1200, 1800]


def test_set_kb_example_answers_a_jpeg_under_the_size(client, photo_jpeg):
    answer = client.post(
        "/set_kb", files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")}, data={"kb": "5", "dpi": "300"}
    )
    body = answer.json()
    assert answer.status_code == 200 and set(body) == {"status", "image_base64", "kb"}
    assert body["kb"]["size_kb"] <= 5 and decoded(body["image_base64"], "image/jpeg").size == (256, 256)


def test_idphoto_crop_example_frames_the_matting_result(client, matted_png):
    cut = np.asarray(Image.open(io.BytesIO(matted_png)))
    assert cut.shape == (256, 256, 4) and cut[..., 3].min() == 0 and cut[..., 3].max() == 255
    answer = client.post(
        "/idphoto_crop?head_measure_ratio=0.2&head_height_ratio=0.45&top_distance_max=0.12&top_distance_min=0.1",
        files={"input_image": ("idphoto_matting.png", matted_png, "image/png")},
        data={"height": "413", "width": "295", "face_detect_model": "mtcnn", "hd": "true", "dpi": "300"},
    )
    body = answer.json()
    assert answer.status_code == 200, answer.text
    assert set(body) == {"status", "image_base64_standard", "image_base64_hd", "report", "models"}
    assert body["models"] == {"face_detect_model": MTCNN_NOTE}
    standard = decoded(body["image_base64_standard"])
    assert (standard.size, standard.mode) == ((295, 413), "RGBA") and np.asarray(standard)[0, 0, 3] == 0


def test_watermark_example_reads_its_style_from_the_query_string(client, photo_jpeg):
    def marked(query: str) -> np.ndarray:
        answer = client.post(
            f"/watermark?{query}",
            files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
            data={"text": "Hello", "dpi": "300"},
        )
        body = answer.json()
        assert answer.status_code == 200 and set(body) == {"status", "image_base64", "font"} and body["status"]
        return np.asarray(decoded(body["image_base64"])).astype(int)

    faint = marked("size=20&opacity=0.5&angle=30&color=%23000000&space=25")
    clear = marked("size=20&opacity=0&angle=30&color=%23000000&space=25")
    original = np.asarray(Image.open(io.BytesIO(photo_jpeg))).astype(int)
    assert np.array_equal(clear, original)  # opacity 0: the photo as it came (PNG, lossless)
    assert faint.mean() < original.mean() - 1  # black text at half opacity darkens the photo


def test_idphoto_touch_ups_change_the_person_only(client, photo_jpeg, idphoto_answer):
    answer = client.post(
        "/idphoto",
        files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
        data={"brightness_strength": "20", "hd": "false"},
    )
    assert answer.status_code == 200, answer.text
    bright = np.asarray(decoded(answer.json()["image_base64_standard"])).astype(int)
    plain = np.asarray(decoded(idphoto_answer["image_base64_standard"])).astype(int)
    person = plain[..., 3] == 255
    assert np.array_equal(bright[..., 3], plain[..., 3])  # the same matte
    assert bright[..., :3][person].mean() > plain[..., :3][person].mean() + 5


def test_a_photo_without_a_face_is_status_false_as_its_server_answers(client, faceless_png):
    answer = client.post("/idphoto", files={"input_image": ("x.png", faceless_png, "image/png")})
    assert answer.status_code == 200
    assert answer.json() == {
        "status": False,
        "error": {
            "code": "face_count",
            "message": "0 faces found; an ID photo needs exactly one",
            "details": {"face_count": 0},
        },
    }


@pytest.mark.parametrize(
    ("route", "fields", "status", "code", "words"),
    [
        ("/idphoto", {}, 422, "invalid_parameter", "input_image"),
        ("/idphoto", {"human_matting_model": "u2net"}, 422, "invalid_parameter", "human_matting_model"),
        ("/add_background", {"render": "3"}, 422, "invalid_parameter", "render"),
        ("/add_background", {"color": "blueish"}, 422, "invalid_parameter", "color"),
        ("/idphoto", {"brightness_strength": "60"}, 422, "invalid_parameter", "brightness_strength"),
        ("/watermark", {"opacity": "2"}, 422, "invalid_parameter", "watermark_opacity"),
        ("/idphoto", {"input_image_base64": "%%%"}, 422, "invalid_parameter", "base64"),
    ],
)
def test_a_callers_mistake_is_a_4xx_with_status_false(client, route, fields, status, code, words, photo_jpeg):
    files = (
        {"input_image": ("x.jpg", photo_jpeg, "image/jpeg")} if fields and "input_image_base64" not in fields else None
    )
    answer = client.post(route, files=files, data=fields or {"dpi": "300"})
    body = answer.json()
    assert answer.status_code == status and body["status"] is False, answer.text
    assert body["error"]["code"] == code and words in body["error"]["message"]


def test_a_transparent_image_is_required_to_add_a_background(client, photo_jpeg):
    answer = client.post("/add_background", files={"input_image": ("x.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 422 and "transparent" in answer.json()["error"]["message"]


def test_a_corrupt_upload_is_a_400(client, photo_jpeg):
    answer = client.post("/set_kb", files={"input_image": ("x.jpg", photo_jpeg[:200], "image/jpeg")})
    assert answer.status_code == 400 and answer.json()["status"] is False


def test_its_paths_honour_api_keys_and_their_tasks(local_backend, photo_jpeg):
    from tests.unit.auth.test_guard import bearer, keyed_client

    keyed = keyed_client(
        local_backend, {"pk_restore": {"id": "restore-only", "tasks": ["restore"]}, "pk_all": {"id": "all"}}
    )
    files = {"input_image": ("x.jpg", photo_jpeg, "image/jpeg")}
    assert keyed.post("/set_kb", files=files).status_code == 401
    refused = keyed.post("/set_kb", files=files, headers=bearer("pk_restore"))
    assert refused.status_code == 403 and refused.json()["status"] is False
    assert refused.json()["error"]["code"] == "forbidden"
    assert keyed.post("/set_kb", files=files, headers=bearer("pk_all")).json()["status"] is True


@pytest.mark.parametrize(
    ("path", "query", "data", "keys"),
    [
        ("/set_kb", "", {"kb": 50, "dpi": 300}, {"status", "image_base64", "kb"}),
        (
            "/watermark",
            "size=20&opacity=0.5&angle=30&color=%23000000&space=25",
            {"text": "Hello", "dpi": 300},
            {"status", "image_base64", "font"},
        ),
        (
            "/idphoto_crop",
            "",
            {
                "height": 413,
                "width": 295,
                "face_detect_model": "mtcnn",
                "hd": "true",
                "dpi": 300,
                "head_measure_ratio": 0.2,
                "head_height_ratio": 0.45,
                "top_distance_max": 0.12,
                "top_distance_min": 0.1,
            },
            {"status", "image_base64_standard", "image_base64_hd", "report", "models"},
        ),
    ],
)
def test_its_python_examples_answer_its_keys(client, photo_jpeg, matted_png, path, query, data, keys):
    image = ("idphoto_matting.png", matted_png, "image/png") if path == "/idphoto_crop" else ("t.jpg", photo_jpeg)
    answer = client.post(f"{path}?{query}", files={"input_image": image}, data={k: str(v) for k, v in data.items()})
    assert answer.status_code == 200, answer.text
    assert set(answer.json()) == keys and answer.json()["status"] is True


def test_idphoto_saves_the_hd_photo_at_the_requests_dpi_as_its_server_does(idphoto_answer):
    """Its server saves every image of /idphoto at `dpi` (300 in its example), the HD copy too; /v1/idphoto writes
    its HD copy at the DPI that keeps the physical size (610 for 600 px of a 295 px, 300 DPI photo)."""
    for key in ("image_base64_standard", "image_base64_hd"):
        assert decoded(idphoto_answer[key]).info["dpi"] == pytest.approx((300, 300), abs=0.5), key


def test_idphoto_crop_saves_both_photos_at_the_requests_dpi(client, matted_png):
    answer = client.post(
        "/idphoto_crop",
        files={"input_image": ("idphoto_matting.png", matted_png, "image/png")},
        data={"height": "413", "width": "295", "hd": "true", "dpi": "350"},
    )
    assert answer.status_code == 200, answer.text
    for key in ("image_base64_standard", "image_base64_hd"):
        assert decoded(answer.json()[key]).info["dpi"] == pytest.approx((350, 350), abs=0.5), key


class CountingBackend:
    """The test backend, recording each ``observe_job`` (the job metric) as ``(task, outcome)``."""

    def __init__(self, backend) -> None:
        self._backend = backend
        self.jobs: list[tuple[str, str]] = []

    def observe_job(self, task: str, outcome: str, engine: str, bytes_in: int, bytes_out: int) -> None:
        self.jobs.append((task, outcome))
        self._backend.observe_job(task, outcome, engine, bytes_in, bytes_out)

    def __getattr__(self, name):
        return getattr(self._backend, name)


@pytest.fixture(scope="module")
def counted(local_backend) -> tuple[CountingBackend, object]:
    backend = CountingBackend(local_backend)
    return backend, client_for(backend)


def test_idphoto_counts_in_the_same_job_metric_as_v1_idphoto(counted, photo_jpeg, faceless_png):
    backend, counting_client = counted
    backend.jobs.clear()
    ours = counting_client.post("/v1/idphoto", files={"image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert ours.status_code == 200, ours.text
    theirs = counting_client.post("/idphoto", files={"input_image": ("me.jpg", photo_jpeg, "image/jpeg")})
    assert theirs.status_code == 200 and theirs.json()["status"] is True, theirs.text
    faceless = counting_client.post("/idphoto", files={"input_image": ("x.png", faceless_png, "image/png")})
    assert faceless.status_code == 200 and faceless.json()["status"] is False
    assert backend.jobs == [("idphoto", "ok"), ("idphoto", "ok"), ("idphoto", "no_face")]


@pytest.mark.parametrize(
    ("path", "transparent", "data", "task"),
    [
        ("/idphoto", False, {"hd": "false"}, "idphoto"),
        ("/human_matting", False, {}, "idphoto-matte"),
        ("/add_background", True, {"color": "638cce"}, "idphoto-background"),
        ("/generate_layout_photos", False, {"kb": "200"}, "idphoto-layout"),
        ("/watermark", False, {"text": "Hello"}, "idphoto-watermark"),
        ("/set_kb", False, {"kb": "20"}, "idphoto-filesize"),
        ("/idphoto_crop", True, {"hd": "false"}, "idphoto-crop"),
    ],
)
def test_each_of_its_paths_runs_the_registry_job_and_counts_it(
    counted, photo_jpeg, matted_png, path, transparent, data, task
):
    backend, counting_client = counted
    backend.jobs.clear()
    image = ("x.png", matted_png, "image/png") if transparent else ("x.jpg", photo_jpeg, "image/jpeg")
    answer = counting_client.post(path, files={"input_image": image}, data=data)
    assert answer.status_code == 200 and answer.json()["status"] is True, answer.text
    assert backend.jobs == [(task, "ok")]


def test_a_refused_call_is_counted_with_its_error_code(counted, photo_jpeg):
    backend, counting_client = counted
    backend.jobs.clear()
    answer = counting_client.post("/add_background", files={"input_image": ("x.jpg", photo_jpeg, "image/jpeg")})
    assert answer.status_code == 422 and answer.json()["status"] is False
    assert backend.jobs == [("idphoto-background", "invalid_parameter")]


def test_idphoto_dresses_the_person_in_formal_clothes_by_our_field_names(client, photo_jpeg, idphoto_answer):
    answer = client.post(
        "/idphoto",
        files={"input_image": ("test0.jpg", photo_jpeg, "image/jpeg")},
        data={"attire": "suit-tie", "attire_color": "navy", "hd": "false"},
    )
    assert answer.status_code == 200, answer.text
    dressed = np.asarray(decoded(answer.json()["image_base64_standard"])).astype(int)
    plain = np.asarray(decoded(idphoto_answer["image_base64_standard"])).astype(int)
    height = plain.shape[0]
    head = plain[: height // 3, :, 3] == 255  # the person's own head (its matte resampled once more: a level or two)
    assert np.abs(dressed[: height // 3][head] - plain[: height // 3][head]).mean() < 2
    assert np.abs(dressed[-height // 6 :, :, :3] - plain[-height // 6 :, :, :3]).mean() > 10  # new clothes below
    assert "attire" not in answer.json().get("ignored_fields", [])
