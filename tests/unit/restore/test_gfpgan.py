"""GFPGAN v1.3/v1.4: official key layout, strict loading of the released formats, the forward contract and its noise.

Equality with the official ``GFPGANv1Clean`` output (bit-exact, same seed) is shown outside the repository; here the
tests pin what that comparison relies on: the layout, the loading, and how much randomness a forward pass draws.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.gfpgan import GFPGAN_VARIANTS, GfpganConfig, GfpganGenerator, build_gfpgan, load_gfpgan
from tests.key_lists import KEY_LISTS, layout, read_key_list

OFFICIAL_PARAMETERS = 86_444_252  # GFPGANv1Clean with the v1.4 arguments, buffers excluded
# 64 px keeps every path (4 down/up blocks, 9 noise layers) at a few milliseconds per forward.
TINY = GfpganConfig(out_size=64, num_style_feat=32, num_mlp=2, channel_multiplier=1, narrow=1 / 16)


def randomized_gfpgan(config: GfpganConfig, seed: int = 0) -> GfpganGenerator:
    """A GFPGAN whose noise strengths and biases (zero or one at initialisation) are random, so every path counts."""
    torch.manual_seed(seed)
    model = build_gfpgan(config).eval().requires_grad_(False)
    for name, param in model.named_parameters():
        if name.endswith("bias") or (name.endswith(".weight") and param.numel() == 1):
            param.add_(torch.randn_like(param) * 0.3)
    return model


@pytest.fixture(scope="module")
def tiny_model() -> GfpganGenerator:
    return randomized_gfpgan(TINY)


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_model: GfpganGenerator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gfpgan") / "tiny.pth"
    torch.save({"params_ema": tiny_model.state_dict()}, path)
    return path


def faces(batch: int, size_px: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(batch, 3, size_px, size_px, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def test_v1_4_layout_and_strict_reload_of_flat_and_wrapped_files(tmp_path: Path) -> None:
    assert GFPGAN_VARIANTS["gfpgan-v1.4"] == GFPGAN_VARIANTS["gfpgan-v1.3"] == GfpganConfig()
    torch.manual_seed(0)
    model = build_gfpgan(GFPGAN_VARIANTS["gfpgan-v1.4"])
    state = model.state_dict()
    assert layout(state) == read_key_list(KEY_LISTS / "gfpgan" / "gfpgan_v1_4_keys.txt")
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMETERS
    del model

    files = {"flat": state, "params_ema": {"params_ema": state}, "params": {"params": state}}
    for name, content in files.items():
        path = tmp_path / f"{name}.pth"
        torch.save(content, path)
        loaded = load_gfpgan(path)
        assert loaded.config == GfpganConfig()
        assert not loaded.training
        assert not any(p.requires_grad for p in loaded.parameters())
        loaded_state = loaded.state_dict()
        assert not any(t.is_meta for t in loaded_state.values())
        for key in ("conv_body_first.weight", "stylegan_decoder.style_convs.13.bias", "condition_shift.6.2.weight"):
            assert torch.equal(loaded_state[key], state[key])
        del loaded, loaded_state
        path.unlink()


def test_forward_shape_and_finite(tiny_model: GfpganGenerator) -> None:
    x = faces(2, TINY.out_size)
    with torch.inference_mode():
        out = tiny_model(x)
    assert out.shape == x.shape and out.dtype == torch.float32
    assert torch.isfinite(out).all()
    assert (out[0] - out[1]).abs().max().item() > 1e-3


def test_same_seed_same_output_different_seed_different_output(tiny_model: GfpganGenerator) -> None:
    x = faces(2, TINY.out_size)
    with torch.inference_mode():
        torch.manual_seed(5)
        first = tiny_model(x)
        torch.manual_seed(5)
        again = tiny_model(x)
        torch.manual_seed(6)
        other = tiny_model(x)
        private = tiny_model(x, generator=torch.Generator().manual_seed(5))
    assert torch.equal(first, again)
    assert (first - other).abs().max().item() > 1e-2
    assert torch.equal(private, first)  # a private generator seeded alike draws the same noise


def test_forward_draws_the_official_noise_sequence(tiny_model: GfpganGenerator) -> None:
    """One ``new_empty(B, 1, H, W).normal_()`` per StyleGAN2 conv: 4×4 once, then two per resolution 8 … out_size."""
    batch = 2
    shapes = [(batch, 1, 4, 4)] + [
        (batch, 1, 2**log_res, 2**log_res) for log_res in range(3, TINY.log_size + 1) for _ in range(2)
    ]
    assert len(shapes) == TINY.num_noise_layers == 9
    with torch.inference_mode():
        torch.manual_seed(11)
        tiny_model(faces(batch, TINY.out_size))
        after_forward = torch.get_rng_state()
        torch.manual_seed(11)
        for shape in shapes:
            torch.empty(shape).normal_()
    assert torch.equal(after_forward, torch.get_rng_state())


def test_noise_is_the_only_randomness(tiny_model: GfpganGenerator) -> None:
    """With every noise strength at zero the output is a pure function of the input, per sample."""
    silent = randomized_gfpgan(TINY)
    for name, param in silent.named_parameters():
        if name.endswith(".weight") and param.numel() == 1:
            param.zero_()
    x = faces(3, TINY.out_size)
    with torch.inference_mode():
        torch.manual_seed(1)
        batched = silent(x)
        torch.manual_seed(2)
        singles = torch.cat([silent(x[i : i + 1]) for i in range(len(x))])
        noisy = tiny_model(x)
    assert (batched - singles).abs().max().item() < 1e-5
    assert (noisy - batched).abs().max().item() > 1e-2


def test_loads_a_non_default_config(tiny_model: GfpganGenerator, tiny_checkpoint: Path) -> None:
    loaded = load_gfpgan(tiny_checkpoint, config=TINY)
    x = faces(1, TINY.out_size)
    with torch.inference_mode():
        torch.manual_seed(3)
        expected = tiny_model(x)
        torch.manual_seed(3)
        assert torch.equal(loaded(x), expected)


def test_wrong_variant_names_the_mismatch(tiny_checkpoint: Path) -> None:
    with pytest.raises(ModelUnavailable) as excinfo:
        load_gfpgan(tiny_checkpoint)
    message = excinfo.value.message
    assert "does not match GFPGAN-512" in message
    assert "missing" in message and "shape mismatches" in message
    assert "conv_body_first.weight: file (8, 3, 1, 1) vs model (32, 3, 1, 1)" in message
    assert excinfo.value.details["missing"][0] == "conv_body_down.4.conv1.weight"


def test_edited_state_dict_names_the_keys(tiny_model: GfpganGenerator, tmp_path: Path) -> None:
    state = dict(tiny_model.state_dict())
    state["stylegan_decoder.extra.weight"] = state.pop("stylegan_decoder.noises.noise3")
    path = tmp_path / "edited.pth"
    torch.save({"params_ema": state}, path)
    with pytest.raises(ModelUnavailable, match=r"stylegan_decoder\.noises\.noise3") as excinfo:
        load_gfpgan(path, config=TINY)
    assert excinfo.value.details["missing"] == ["stylegan_decoder.noises.noise3"]
    assert excinfo.value.details["unexpected"] == ["stylegan_decoder.extra.weight"]


def test_unreadable_files_raise_model_unavailable(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="not found"):
        load_gfpgan(tmp_path / "absent.pth")
    garbage = tmp_path / "garbage.pth"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelUnavailable, match="cannot read GFPGAN checkpoint"):
        load_gfpgan(garbage)
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(tiny_checkpoint.read_bytes()[:2000])
    with pytest.raises(ModelUnavailable):
        load_gfpgan(truncated, config=TINY)
    torch.save({"params_ema": [1, 2, 3]}, garbage)
    with pytest.raises(ModelUnavailable, match="not a state dict"):
        load_gfpgan(garbage)


def test_forward_rejects_wrong_input_shape(tiny_model: GfpganGenerator) -> None:
    with pytest.raises(InvalidParameter, match="expects B×3×64×64"):
        tiny_model(torch.zeros(1, 3, 32, 32))
    with pytest.raises(InvalidParameter, match="B ≥ 1"):
        tiny_model(torch.zeros(0, 3, 64, 64))


def test_bad_configs_are_invalid_parameters() -> None:
    with pytest.raises(InvalidParameter, match="power of two"):
        GfpganConfig(out_size=500)
    with pytest.raises(InvalidParameter, match="power of two"):
        GfpganConfig(out_size=2048)
    with pytest.raises(InvalidParameter, match="need 2:1"):  # 512 × 3/1024 = 1 decoder channel, 0 in the U-Net
        GfpganConfig(out_size=64, narrow=3 / 1024)
