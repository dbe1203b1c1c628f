"""GPEN pre/post-processing, batched restoration, and the classic (non-neural) engine."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio

from deployments.common.errors import InvalidParameter
from deployments.common.torch_device import to_memory_format
from deployments.restore.classic import restore_face_classic
from deployments.restore.gpen import GpenConfig
from deployments.restore.inference import faces_to_tensor, restore_batch, tensor_to_faces
from tests.gpen_samples import randomized_gpen

TINY = GpenConfig(size=32, style_dim=16, n_mlp=1, narrow=1 / 32)


@pytest.fixture(scope="module")
def tiny_model() -> torch.nn.Module:
    return randomized_gpen(TINY)


def test_faces_to_tensor_maps_uint8_to_unit_range() -> None:
    crop = np.zeros((4, 4, 3), np.uint8)
    crop[..., 0] = 255
    crop[..., 2] = 51
    tensor = faces_to_tensor([crop], 4)
    assert tensor.shape == (1, 3, 4, 4) and tensor.dtype == torch.float32
    assert torch.all(tensor[0, 0] == 1.0) and torch.all(tensor[0, 1] == -1.0)
    assert torch.allclose(tensor[0, 2], torch.tensor(51 / 127.5 - 1))


def test_faces_to_tensor_resizes_other_sizes(astronaut_rgb: np.ndarray) -> None:
    tensor = faces_to_tensor([astronaut_rgb, astronaut_rgb[:100, :80]], 64)
    assert tensor.shape == (2, 3, 64, 64)
    assert faces_to_tensor([], 64).shape == (0, 3, 64, 64)


@pytest.mark.parametrize(
    "bad", [np.zeros((8, 8), np.uint8), np.zeros((8, 8, 4), np.uint8), np.zeros((8, 8, 3), np.float32)]
)
def test_faces_to_tensor_rejects_off_contract_crops(bad: np.ndarray) -> None:
    with pytest.raises(InvalidParameter, match="crop 0"):
        faces_to_tensor([bad], 8)


def test_round_trip_loses_at_most_one_level(astronaut_rgb: np.ndarray) -> None:
    crop = astronaut_rgb[:64, :64]
    (back,) = tensor_to_faces(faces_to_tensor([crop], 64))
    assert back.dtype == np.uint8 and back.shape == crop.shape and back.flags.c_contiguous
    diff = crop.astype(int) - back.astype(int)
    assert diff.min() >= 0 and diff.max() <= 1  # truncation, as in the official demo, never rounds up
    assert (diff == 0).mean() > 0.25


def test_tensor_to_faces_clips_and_truncates() -> None:
    values = torch.tensor([-3.0, 1.5, 100.7 / 127.5 - 1]).view(1, 3, 1, 1)
    (face,) = tensor_to_faces(values)
    assert face[0, 0].tolist() == [0, 255, 100]


def test_restore_batch_matches_direct_forward(tiny_model: torch.nn.Module, astronaut_rgb: np.ndarray) -> None:
    crops = [astronaut_rgb[:32, :32], astronaut_rgb[100:132, 200:232], astronaut_rgb]
    restored = restore_batch(tiny_model, crops, size_px=TINY.size)
    with torch.inference_mode():
        expected = tensor_to_faces(tiny_model(faces_to_tensor(crops, TINY.size)))
    assert len(restored) == 3
    for got, want in zip(restored, expected, strict=True):
        assert got.shape == (32, 32, 3) and got.dtype == np.uint8
        assert np.array_equal(got, want)
    assert restore_batch(tiny_model, [], size_px=TINY.size) == []


def test_restore_batch_channels_last_agrees(tiny_model: torch.nn.Module, astronaut_rgb: np.ndarray) -> None:
    crops = [astronaut_rgb[:32, :32], astronaut_rgb[200:232, 200:232]]
    plain = restore_batch(tiny_model, crops, size_px=TINY.size)
    channels_last = restore_batch(tiny_model, crops, channels_last=True, size_px=TINY.size)
    for a, b in zip(plain, channels_last, strict=True):
        assert np.abs(a.astype(int) - b.astype(int)).max() <= 1


def test_autocast_is_cuda_only_and_validated(tiny_model: torch.nn.Module) -> None:
    crops = [np.full((32, 32, 3), 128, np.uint8)]
    plain = restore_batch(tiny_model, crops, size_px=TINY.size)
    assert np.array_equal(restore_batch(tiny_model, crops, autocast_dtype="bfloat16", size_px=TINY.size)[0], plain[0])
    with pytest.raises(InvalidParameter, match="autocast_dtype"):
        restore_batch(tiny_model, crops, autocast_dtype="float32", size_px=TINY.size)


def test_classic_changes_image_but_keeps_contract(astronaut_rgb: np.ndarray) -> None:
    out = restore_face_classic(astronaut_rgb)
    assert out.shape == astronaut_rgb.shape and out.dtype == np.uint8 and out.flags.c_contiguous
    assert np.abs(out.astype(int) - astronaut_rgb.astype(int)).mean() > 0.5
    assert np.array_equal(out, restore_face_classic(astronaut_rgb))


def test_classic_reduces_noise(astronaut_rgb: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    noisy = np.clip(astronaut_rgb + rng.normal(0.0, 15.0, astronaut_rgb.shape), 0, 255).astype(np.uint8)
    before_db = peak_signal_noise_ratio(astronaut_rgb, noisy)
    after_db = peak_signal_noise_ratio(astronaut_rgb, restore_face_classic(noisy))
    assert after_db > before_db + 2.0


def test_classic_rejects_off_contract_input() -> None:
    with pytest.raises(InvalidParameter):
        restore_face_classic(np.zeros((8, 8), np.uint8))


def test_channels_last_keeps_the_5d_modulated_weights_and_the_output(
    tiny_model: torch.nn.Module, astronaut_rgb: np.ndarray
) -> None:
    """`Module.to(memory_format=channels_last)` refuses GPEN's 5-D weights; `to_memory_format` converts the 4-D."""
    crops = [astronaut_rgb[:64, :64]]
    plain = restore_batch(tiny_model, crops, size_px=TINY.size)
    converted = to_memory_format(copy.deepcopy(tiny_model))
    assert any(p.dim() == 5 for p in converted.parameters())
    four_d = [p for p in converted.parameters() if p.dim() == 4]
    assert four_d and all(p.is_contiguous(memory_format=torch.channels_last) for p in four_d)
    (out,) = restore_batch(converted, crops, size_px=TINY.size, channels_last=True)
    assert np.abs(out.astype(int) - plain[0].astype(int)).max() <= 1
