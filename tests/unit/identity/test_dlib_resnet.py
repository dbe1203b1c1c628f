"""The PyTorch port of dlib's face recognition ResNet gives dlib's own descriptors, from the official ``.dat``.

The weights come from the model store (skipped, naming the pull command, where they are absent); the parser's
primitives and the network's shapes are tested without them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.identity.dlib_resnet import (
    CHIP_SIZE_PX,
    DlibFaceResNet,
    DlibStream,
    add_zero_padded,
    descriptors,
    face_chips,
    load_dlib_resnet,
)

# Both compute in float32, in different orders (dlib's own gemm on im2col, oneDNN here), and the port folds each
# affine into its conv: the descriptors differ by about 5e-7 (components up to ~0.4); 1e-5 leaves room for other CPUs.
TOLERANCE = 1e-5
ASTRONAUT_FACE = (170, 40, 300, 180)  # x0, y0, x1, y1 of the face in skimage's astronaut()


@pytest.fixture(scope="module")
def dlib_paths() -> tuple[Path, Path]:
    from deployments.common.settings import get_model_settings

    store = get_model_settings().open_model_store()
    paths = store.find("dlib-face-recognition"), store.find("dlib-shape-5")
    if None in paths:
        pytest.skip("dlib's face models are not in the model store: run `portrait models pull --builtin`")
    return paths


@pytest.fixture(scope="module")
def port(dlib_paths) -> DlibFaceResNet:
    return load_dlib_resnet(dlib_paths[0])


@pytest.fixture(scope="module")
def recognizer(dlib_paths):
    dlib = pytest.importorskip("dlib")
    return dlib.face_recognition_model_v1(str(dlib_paths[0]))


@pytest.fixture(scope="module")
def astronaut_shape(dlib_paths):
    """The astronaut's face found as dlib's example finds it: frontal detector, then the 5-point shape predictor."""
    dlib = pytest.importorskip("dlib")
    from skimage import data

    image = data.astronaut()
    x0, y0, x1, y1 = ASTRONAUT_FACE
    boxes = [box for box in dlib.get_frontal_face_detector()(image, 1) if x0 <= box.center().x <= x1]
    boxes = [box for box in boxes if y0 <= box.center().y <= y1]
    assert len(boxes) == 1, boxes
    return image, dlib.shape_predictor(str(dlib_paths[1]))(image, boxes[0])


def test_the_port_equals_dlib_on_the_astronauts_face(port, recognizer, astronaut_shape):
    image, shape = astronaut_shape
    expected = np.asarray(recognizer.compute_face_descriptor(image, shape, 0))
    chips = face_chips(image, [shape])
    got = descriptors(port, chips)
    assert chips.shape == (1, CHIP_SIZE_PX, CHIP_SIZE_PX, 3) and got.shape == (1, 128) and got.dtype == np.float32
    assert np.abs(got[0] - expected).max() < TOLERANCE
    assert np.linalg.norm(expected) > 1.1  # the raw fc output: not L2-normalised, and the port does not normalise


def test_the_port_equals_dlib_on_a_batch_of_chips(port, recognizer, astronaut_shape):
    image, shape = astronaut_shape
    rng = np.random.default_rng(7)
    face = face_chips(image, [shape])[0]
    noisy = np.clip(face + rng.normal(0, 20, face.shape), 0, 255).astype(np.uint8)
    chips = np.stack([face, face[:, ::-1], noisy, *rng.integers(0, 256, (3, CHIP_SIZE_PX, CHIP_SIZE_PX, 3), np.uint8)])
    expected = np.asarray([np.asarray(v) for v in recognizer.compute_face_descriptor(list(chips), 0)])
    got = descriptors(port, chips, batch_size=4)  # a full batch and a partial one
    assert np.abs(got - expected).max() < TOLERANCE


def test_a_truncated_file_fails_naming_the_byte_where_it_ends(dlib_paths, tmp_path):
    truncated = tmp_path / "truncated.dat"
    truncated.write_bytes(dlib_paths[0].read_bytes()[:1_000_000])
    with pytest.raises(ModelUnavailable, match=r"not dlib's face recognition ResNet v1: at byte \d+: expected layer<"):
        load_dlib_resnet(truncated)
    with pytest.raises(ModelUnavailable, match="the file ends at byte 1000000: truncated"):
        load_dlib_resnet(truncated)


def test_another_dlib_file_fails_at_the_first_byte_that_differs(dlib_paths, tmp_path):
    other = tmp_path / "other.dat"
    other.write_bytes(dlib_paths[0].read_bytes().replace(b"con_4", b"con_9", 1))
    with pytest.raises(ModelUnavailable, match=r"at byte 334: expected layer<130> \(con\)'s version 'con_4'.*'con_9'"):
        load_dlib_resnet(other)
    with pytest.raises(ModelUnavailable, match="at byte 2: expected the loss layer's version"):
        load_dlib_resnet(dlib_paths[1])  # the shape predictor: another dlib object altogether
    longer = tmp_path / "longer.dat"
    longer.write_bytes(dlib_paths[0].read_bytes() + b"\0")
    with pytest.raises(ModelUnavailable, match="expected the end of the network, found 1 more bytes"):
        load_dlib_resnet(longer)


def test_dlibs_packed_integers_floats_and_tensors_are_read_as_dlib_writes_them():
    # -5; 4736 in two bytes; the file's loss margin 0.04 as float_details (mantissa 0xa3d70a, exponent -28);
    # a 1x2x1x1 tensor (version 2, four sizes, raw float32); a bool.
    integers, margin = b"\x81\x05" + b"\x02\x80\x12", b"\x03\x0a\xd7\xa3" + b"\x81\x1c"
    tensor = b"\x01\x02" + b"\x01\x01\x01\x02\x01\x01\x01\x01" + np.array([1.5, -2.0], "<f4").tobytes()
    stream = DlibStream(integers + margin + tensor + b"1")
    assert stream.int_("a") == -5 and stream.int_("b") == 4736
    assert stream.float_("margin") == pytest.approx(0.04, rel=1e-7)
    assert stream.tensor("t").ravel().tolist() == [1.5, -2.0]
    assert stream.bool_("flag") is True and stream.offset == len(stream.data)


def test_add_prev_pads_the_smaller_tensor_with_zeros_at_the_end_of_each_axis():
    block, shortcut = torch.ones(1, 4, 3, 3), torch.full((1, 2, 4, 4), 10.0)
    total = add_zero_padded(block, shortcut)
    assert total.shape == (1, 4, 4, 4)
    assert total[0, :2, :3, :3].eq(11).all() and total[0, 2:, :3, :3].eq(1).all()
    assert total[0, :2, 3, :].eq(10).all() and total[0, 2:, 3, :].eq(0).all()


def test_the_network_maps_chips_to_128_finite_values_with_any_weights():
    model = DlibFaceResNet().eval()
    chips = np.random.default_rng(0).integers(0, 256, (3, CHIP_SIZE_PX, CHIP_SIZE_PX, 3), np.uint8)
    out = descriptors(model, chips, batch_size=2)
    assert out.shape == (3, 128) and np.isfinite(out).all()
    mirrored = chips[:, :, ::-1]  # a view with a negative stride, read-only too
    mirrored.flags.writeable = False
    assert np.array_equal(descriptors(model, mirrored), descriptors(model, mirrored.copy()))


@pytest.mark.parametrize(
    "chips", [np.zeros((1, 112, 112, 3), np.uint8), np.zeros((150, 150, 3), np.uint8), np.zeros((1, 150, 150, 3))]
)
def test_descriptors_refuse_anything_but_150px_uint8_rgb_chips(chips):
    with pytest.raises(InvalidParameter, match="face chips must be"):
        descriptors(DlibFaceResNet(), chips)
