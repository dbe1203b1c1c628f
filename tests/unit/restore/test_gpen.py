"""GPEN generator: official key layout (both released variants), strict loading, and the forward contract."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.gpen import GPEN_VARIANTS, GpenConfig, build_gpen, infer_gpen_config, load_gpen
from tests.gpen_samples import randomized_gpen
from tests.key_lists import KEY_LISTS, layout, read_key_list

# Parameter counts of the official FullGenerator (buffers excluded).
OFFICIAL_PARAMETERS = {"gpen-bfr-512": 71_005_223, "gpen-bfr-256": 18_879_010}
# Small enough to run in milliseconds, large enough (64 px) that the channel multiplier shows in the shapes.
TINY = GpenConfig(size=64, style_dim=32, n_mlp=2, channel_multiplier=1, narrow=1 / 16)


@pytest.fixture(scope="module")
def tiny_model() -> torch.nn.Module:
    return randomized_gpen(TINY)


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_model: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpen") / "tiny.pth"
    torch.save(tiny_model.state_dict(), path)
    return path


@pytest.mark.parametrize("variant", sorted(GPEN_VARIANTS))
def test_official_variant_layout_and_strict_reload(variant: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_gpen(GPEN_VARIANTS[variant])
    state = model.state_dict()
    assert layout(state) == read_key_list(KEY_LISTS / "gpen" / f"{variant.replace('-', '_')}_keys.txt")
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMETERS[variant]

    flat, wrapped = tmp_path / "flat.pth", tmp_path / "wrapped.pth"
    torch.save(state, flat)
    torch.save({"g_ema": state}, wrapped)
    del model
    for path in (flat, wrapped):
        loaded = load_gpen(path)
        assert loaded.config == GPEN_VARIANTS[variant]
        assert not loaded.training
        assert not any(p.requires_grad for p in loaded.parameters())
        assert not any(t.is_meta for t in loaded.state_dict().values())
        for key in ("generator.input.input", "final_linear.0.weight", "ecd1.0.0.kernel"):
            assert torch.equal(loaded.state_dict()[key], state[key])
        del loaded


def test_forward_shape_and_finite(tiny_model: torch.nn.Module) -> None:
    x = torch.rand(2, 3, TINY.size, TINY.size) * 2 - 1
    with torch.inference_mode():
        out = tiny_model(x)
    assert out.shape == x.shape and out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_batch_equals_single_calls_and_is_deterministic(tiny_model: torch.nn.Module) -> None:
    torch.manual_seed(1)
    x = torch.rand(4, 3, TINY.size, TINY.size) * 2 - 1
    with torch.inference_mode():
        batched = tiny_model(x)
        singles = torch.cat([tiny_model(x[i : i + 1]) for i in range(len(x))])
        again = tiny_model(x)
    assert (batched - singles).abs().max().item() < 1e-5
    assert torch.equal(batched, again)


def test_encoder_features_reach_the_output(tiny_model: torch.nn.Module) -> None:
    x = torch.rand(2, 3, TINY.size, TINY.size) * 2 - 1
    with torch.inference_mode():
        out = tiny_model(x)
    assert (out[0] - out[1]).abs().max().item() > 1e-3


def test_forward_rejects_wrong_input_shape(tiny_model: torch.nn.Module) -> None:
    with pytest.raises(InvalidParameter, match="expects"):
        tiny_model(torch.zeros(1, 3, TINY.size // 2, TINY.size // 2))
    with pytest.raises(InvalidParameter, match="B ≥ 1"):
        tiny_model(torch.zeros(0, 3, TINY.size, TINY.size))


def test_infers_config_and_loads_without_size(tiny_model: torch.nn.Module, tiny_checkpoint: Path) -> None:
    assert infer_gpen_config(tiny_model.state_dict()) == TINY
    loaded = load_gpen(tiny_checkpoint)
    assert loaded.config == TINY
    x = torch.rand(1, 3, TINY.size, TINY.size) * 2 - 1
    with torch.inference_mode():
        assert torch.equal(loaded(x), tiny_model(x))


def test_explicit_config_must_agree_with_size(tiny_checkpoint: Path) -> None:
    assert load_gpen(tiny_checkpoint, config=TINY).config == TINY
    with pytest.raises(InvalidParameter):
        load_gpen(tiny_checkpoint, 128, config=TINY)


def test_wrong_variant_names_the_mismatch(tiny_checkpoint: Path) -> None:
    with pytest.raises(ModelUnavailable) as excinfo:
        load_gpen(tiny_checkpoint, config=GpenConfig(size=128, style_dim=32, n_mlp=2, narrow=1 / 16))
    message = excinfo.value.message
    assert "missing" in message and "shape mismatches" in message
    assert excinfo.value.details["missing"]


def test_edited_state_dict_names_the_keys(tiny_model: torch.nn.Module, tmp_path: Path) -> None:
    state = dict(tiny_model.state_dict())
    state["generator.extra.weight"] = state.pop("generator.conv1.noise.weight")
    path = tmp_path / "edited.pth"
    torch.save(state, path)
    with pytest.raises(ModelUnavailable, match=r"generator\.conv1\.noise\.weight") as excinfo:
        load_gpen(path)
    assert excinfo.value.details["unexpected"] == ["generator.extra.weight"]


@pytest.mark.parametrize("content", [b"not a checkpoint", b""], ids=["garbage", "empty"])
def test_corrupt_checkpoint_raises_model_unavailable(content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.pth"
    path.write_bytes(content)
    with pytest.raises(ModelUnavailable, match="cannot read"):
        load_gpen(path, 256)


def test_truncated_checkpoint_raises_model_unavailable(tiny_checkpoint: Path, tmp_path: Path) -> None:
    path = tmp_path / "truncated.pth"
    path.write_bytes(tiny_checkpoint.read_bytes()[:2000])
    with pytest.raises(ModelUnavailable):
        load_gpen(path)


def test_missing_file_and_non_state_dict(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="not found"):
        load_gpen(tmp_path / "absent.pth")
    path = tmp_path / "list.pth"
    torch.save([1, 2, 3], path)
    with pytest.raises(ModelUnavailable, match="not a state dict"):
        load_gpen(path)
    torch.save({"weight": torch.zeros(1)}, path)
    with pytest.raises(ModelUnavailable, match="cannot infer"):
        load_gpen(path)


def test_unknown_size_and_bad_config_are_invalid_parameters(tiny_checkpoint: Path) -> None:
    with pytest.raises(InvalidParameter, match="known sizes"):
        load_gpen(tiny_checkpoint, 1024)
    with pytest.raises(InvalidParameter):
        GpenConfig(size=100)
