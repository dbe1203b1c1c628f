"""The portrait parse: background, hair, body skin, face skin, clothes, others, per pixel.

The fallback (matte + face mesh + the face's own colours) runs on real portraits through the real face analyzer and
MODNet matte; the MediaPipe engine runs a real ``.tflite`` built here (one 1x1 convolution: each colour channel
votes for one class), since its weights are a download the tests never fetch.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as tfl

from deployments.common.errors import InternalError, InvalidParameter
from deployments.common.image import decode_image
from deployments.common.weights import ModelStore, default_models, load_manifest
from deployments.faces.analyze import FaceAnalysisPredictor
from deployments.idphoto.parse import (
    BACKGROUND,
    BODY_SKIN,
    CLOTHES,
    FACE_SKIN,
    FALLBACK_ENGINE,
    HAIR,
    MULTICLASS_MODEL,
    MulticlassParser,
    labels_from_scores,
    parse_portrait,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
PHOTOS = [
    "astronaut",
    pytest.param("hivision_test0.jpg", marks=pytest.mark.eval),
    pytest.param("hivision_test1.jpg", marks=pytest.mark.eval),
    pytest.param("hivision_test2.jpg", marks=pytest.mark.eval),
]


@pytest.fixture(scope="module")
def analyzer(mediapipe_dir) -> FaceAnalysisPredictor:
    return FaceAnalysisPredictor(mediapipe_dir)


@pytest.fixture(scope="module")
def portrait(request, analyzer, matter, astronaut_rgb):
    """A photo, its one face, its MODNet matte (float32) and its fallback parse, computed once per photo name."""
    cache: dict[str, tuple] = {}

    def load(name: str):
        if name not in cache:
            if name == "astronaut":
                rgb = astronaut_rgb
            else:
                shared = request.getfixturevalue("shared_dir")
                rgb = decode_image((shared / "eval" / "idphoto" / name).read_bytes()).rgb
            faces = analyzer.analyze(rgb)
            assert len(faces) == 1
            alpha = matter.matte(rgb, "modnet")
            cache[name] = (rgb, faces[0], alpha, parse_portrait(rgb, alpha, faces))
        return cache[name]

    return load


def _face_frame_e(shape_hw, face) -> tuple[np.ndarray, np.ndarray]:
    """Every pixel in eye distances from the chin: across the face (right) and down it."""
    eyes = np.asarray(face.landmarks[:2], np.float64)
    eye_px = float(np.linalg.norm(eyes[1] - eyes[0]))
    right = (eyes[1] - eyes[0]) / eye_px
    ys, xs = np.mgrid[: shape_hw[0], : shape_hw[1]].astype(np.float64)
    dx, dy = xs - face.chin[0], ys - face.chin[1]
    return (dx * right[0] + dy * right[1]) / eye_px, (-dx * right[1] + dy * right[0]) / eye_px


def _share(parse, where: np.ndarray, region: int) -> float:
    assert where.sum() > 100
    return float((parse.labels[where] == region).mean())


@pytest.mark.parametrize("photo", PHOTOS)
def test_the_fallback_labels_background_face_crown_and_neck(portrait, photo):
    """Outside the matte is background, exactly; the eyes, nose and mouth are face skin; the top of the head is
    hair; just below the chin (0.1 to 0.25 E, within 0.3 E of the face's axis) at least 90 % is body skin."""
    rgb, face, alpha, parse = portrait(photo)
    assert parse.engine == FALLBACK_ENGINE and parse.labels.shape == rgb.shape[:2] and parse.labels.dtype == np.uint8
    assert np.array_equal(parse.background, alpha < 0.5)
    assert [int(parse.labels[round(y), round(x)]) for x, y in face.landmarks] == [FACE_SKIN] * 5
    eye_px = face.eye_distance_px
    x = round(float(face.landmarks[:2, 0].mean()))
    top = int(np.argmax(alpha[:, x] >= 0.5))
    ys, xs = np.mgrid[: rgb.shape[0], : rgb.shape[1]]
    crown = (ys >= top + 0.05 * eye_px) & (ys <= top + 0.3 * eye_px) & (np.abs(xs - x) < 0.4 * eye_px) & (alpha >= 0.5)
    assert _share(parse, crown, HAIR) >= 0.9
    u, v = _face_frame_e(rgb.shape[:2], face)
    neck = (v > 0.1) & (v < 0.25) & (np.abs(u) < 0.3)
    assert _share(parse, neck, BODY_SKIN) >= 0.9
    assert not parse.others.any()  # the fallback finds no accessories


@pytest.mark.parametrize("photo", ["astronaut", pytest.param("hivision_test0.jpg", marks=pytest.mark.eval)])
def test_the_fallback_calls_a_suit_at_the_shoulders_clothes(portrait, photo):
    """The astronaut's flight suit and a dark suit beside dark short hair: at least 90 % of the person at the
    shoulders (1 to 2 E below the chin, 1.8 to 2.6 E beside the axis) is clothes."""
    rgb, face, alpha, parse = portrait(photo)
    u, v = _face_frame_e(rgb.shape[:2], face)
    shoulders = (v > 1.0) & (v < 2.0) & (np.abs(u) > 1.8) & (np.abs(u) < 2.6) & (alpha >= 0.5)
    assert _share(parse, shoulders, CLOTHES) >= 0.9


@pytest.mark.eval
def test_long_hair_on_both_shoulders_is_hair(portrait):
    """hivision_test1: long dark hair over a white top falls on both shoulders (0.5 to 1.5 E below the chin, 1.2 to
    2 E beside the axis): at least 65 % of each side is hair, the top's middle below the neck is not."""
    rgb, face, alpha, parse = portrait("hivision_test1.jpg")
    u, v = _face_frame_e(rgb.shape[:2], face)
    for side in (-1.0, 1.0):
        shoulder = (v > 0.5) & (v < 1.5) & (side * u > 1.2) & (side * u < 2.0)
        assert _share(parse, shoulder, HAIR) >= 0.65
    chest = (v > 1.5) & (v < 2.5) & (np.abs(u) < 0.5)
    assert _share(parse, chest, HAIR) <= 0.05


@pytest.mark.eval
def test_dark_straps_below_dark_hair_are_not_hair(portrait):
    """hivision_test2: the child's hair ends at the shoulders, where dark braces run down over the blouse; the
    braces (1.5 to 2.5 E below the chin, 1.5 to 1.75 E left of the axis) stay clothes, not hair."""
    rgb, face, alpha, parse = portrait("hivision_test2.jpg")
    u, v = _face_frame_e(rgb.shape[:2], face)
    brace = (v > 1.5) & (v < 2.5) & (u > -1.75) & (u < -1.5)
    assert _share(parse, brace, HAIR) <= 0.05


@pytest.mark.parametrize("photo", PHOTOS)
def test_without_a_mesh_the_face_is_an_ellipse_and_little_else_changes(portrait, photo):
    """A face whose mesh was unsure has no outline: an ellipse from the eyes and chin stands in; the landmarks are
    still face skin and at least 98 % of the labels agree with the mesh's parse."""
    rgb, face, alpha, parse = portrait(photo)
    bare = parse_portrait(rgb, alpha, [dataclasses.replace(face, mesh=None)])
    assert [int(bare.labels[round(y), round(x)]) for x, y in face.landmarks] == [FACE_SKIN] * 5
    assert (bare.labels == parse.labels).mean() >= 0.98


def test_a_uint8_matte_parses_as_its_float_twin(portrait):
    rgb, face, alpha, parse = portrait("astronaut")
    alpha_u8 = np.clip(np.rint(alpha * 255.0), 0, 255).astype(np.uint8)
    assert (parse_portrait(rgb, alpha_u8, [face]).labels == parse.labels).mean() >= 0.999


def test_the_fallback_refuses_a_matte_of_another_size_and_no_face(portrait):
    rgb, face, alpha, _ = portrait("astronaut")
    with pytest.raises(InvalidParameter, match="matte"):
        parse_portrait(rgb, alpha[:-1], [face])
    with pytest.raises(InvalidParameter, match="face"):
        parse_portrait(rgb, alpha, [])


def test_mask_joins_regions(portrait):
    _, _, _, parse = portrait("astronaut")
    assert np.array_equal(parse.mask(CLOTHES, BODY_SKIN), parse.clothes | parse.body_skin)
    assert np.array_equal(parse.mask(BACKGROUND), parse.background)


# ---------------------------------------------------------------------------------------------------------------
# MediaPipe selfie multiclass


def _colour_vote_tflite(size_px: int = 256) -> bytes:
    """A real TFLite model with the multiclass model's input and output shapes, ``(1, size, size, 3)`` float32 to
    ``(1, size, size, 6)``: one 1x1 convolution whose red channel votes for clothes, green for hair, blue for
    background."""
    weights = np.zeros((6, 1, 1, 3), np.float32)
    weights[CLOTHES, 0, 0, 0] = weights[HAIR, 0, 0, 1] = weights[BACKGROUND, 0, 0, 2] = 10.0
    model = tfl.ModelT()
    model.version = 3
    code = tfl.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = tfl.BuiltinOperator.CONV_2D
    code.version = 1
    model.operatorCodes = [code]

    def buffer(values: np.ndarray | None = None) -> tfl.BufferT:
        stored = tfl.BufferT()
        if values is not None:
            stored.data = np.frombuffer(values.astype(np.float32).tobytes(), np.uint8)
        return stored

    def tensor(name: str, shape: list[int], index: int) -> tfl.TensorT:
        made = tfl.TensorT()
        made.name, made.shape, made.type, made.buffer = name, np.array(shape, np.int32), tfl.TensorType.FLOAT32, index
        return made

    model.buffers = [buffer(), buffer(), buffer(weights), buffer(np.zeros(6)), buffer()]
    graph = tfl.SubGraphT()
    graph.tensors = [
        tensor("image", [1, size_px, size_px, 3], 1),
        tensor("filter", [6, 1, 1, 3], 2),
        tensor("bias", [6], 3),
        tensor("scores", [1, size_px, size_px, 6], 4),
    ]
    graph.inputs, graph.outputs = [0], [3]
    convolution = tfl.OperatorT()
    convolution.opcodeIndex, convolution.inputs, convolution.outputs = 0, [0, 1, 2], [3]
    options = tfl.Conv2DOptionsT()
    options.padding, options.strideW, options.strideH = tfl.Padding.SAME, 1, 1
    convolution.builtinOptionsType, convolution.builtinOptions = tfl.BuiltinOptions.Conv2DOptions, options
    graph.operators = [convolution]
    model.subgraphs = [graph]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


@pytest.fixture
def multiclass_store(tmp_path) -> ModelStore:
    """A model store under the shipped manifest, holding the colour-vote model where the multiclass weights go."""
    store = ModelStore(tmp_path, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    path = store.local_path(MULTICLASS_MODEL)
    path.parent.mkdir(parents=True)
    path.write_bytes(_colour_vote_tflite())
    return store


def test_the_multiclass_model_parses_a_photo_of_any_shape_stretched_to_its_input(multiclass_store):
    """A 300x200 photo, red on its left half, green top right, blue bottom right: the model sees it stretched to
    256x256 and its labels come back at the photo's size, each quarter its colour's class; the engine is the
    manifest's."""
    parser = MulticlassParser.from_store(multiclass_store)
    rgb = np.zeros((200, 300, 3), np.uint8)
    rgb[:, :150, 0] = 255
    rgb[:100, 150:, 1] = 255
    rgb[100:, 150:, 2] = 255
    parse = parser.parse(rgb)
    assert parse.engine == "selfie-multiclass" and parse.labels.shape == (200, 300)
    assert (parse.labels[:, :148] == CLOTHES).all()
    assert (parse.labels[:98, 152:] == HAIR).all()
    assert (parse.labels[102:, 152:] == BACKGROUND).all()


def test_without_its_weights_there_is_no_multiclass_parser(tmp_path):
    empty = ModelStore(tmp_path, load_manifest(REPO_ROOT / "configs" / "models.yaml"))
    assert MulticlassParser.from_store(empty) is None


def test_a_model_of_another_input_size_is_refused(tmp_path):
    path = tmp_path / "other.tflite"
    path.write_bytes(_colour_vote_tflite(128))
    with pytest.raises(InternalError, match="256"):
        MulticlassParser(path, "selfie-multiclass")


def test_scores_decode_to_the_highest_class_at_the_photos_size():
    """Six score planes of 2x2 (logits: the highest wins) resized to 4x4: each quarter keeps its class; a seventh
    plane is refused."""
    scores = np.zeros((1, 2, 2, 6), np.float32)
    for (y, x), region in zip(((0, 0), (0, 1), (1, 0), (1, 1)), (HAIR, FACE_SKIN, BODY_SKIN, CLOTHES), strict=True):
        scores[0, y, x, region] = 5.0
    labels = labels_from_scores(scores, (4, 4))
    assert labels.tolist() == [[HAIR] * 2 + [FACE_SKIN] * 2] * 2 + [[BODY_SKIN] * 2 + [CLOTHES] * 2] * 2
    with pytest.raises(InternalError, match="6"):
        labels_from_scores(np.zeros((1, 2, 2, 7), np.float32), (4, 4))


def test_the_multiclass_entry_is_a_download_never_pulled_by_default():
    """Its weights are a download (not a built-in), pinned by the first download (no published hash), from
    MediaPipe's own bucket; until its model card's licence is confirmed it is not commercial use, so neither
    ``portrait models pull --default`` nor ``make run`` fetches it."""
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    spec = manifest[MULTICLASS_MODEL]
    assert not spec.builtin and spec.sha256 is None and not spec.commercial_use
    assert spec.url.startswith("https://storage.googleapis.com/mediapipe-models/image_segmenter/selfie_multiclass")
    assert MULTICLASS_MODEL not in default_models(manifest)
