"""CodeFormer: official key layout, strict loading, and the forward contract (fidelity weight included)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.codeformer import (
    CODEFORMER_512,
    CodeFormer,
    CodeFormerConfig,
    build_codeformer,
    load_codeformer,
)
from tests.codeformer_samples import TINY_CODEFORMER as TINY
from tests.codeformer_samples import randomized_codeformer as randomized
from tests.key_lists import KEY_LISTS, layout, read_key_list

KEY_LIST = KEY_LISTS / "codeformer" / "codeformer_keys.txt"
# Parameter count of the official CodeFormer as inference_codeformer.py builds it (it has no buffers).
OFFICIAL_PARAMETERS = 94_112_707


@pytest.fixture(scope="module")
def tiny_model() -> CodeFormer:
    return randomized(TINY)


@pytest.fixture
def faces() -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    return torch.rand(3, 3, TINY.size_px, TINY.size_px, generator=generator) * 2 - 1


def test_official_layout_and_parameter_count() -> None:
    with torch.device("meta"):
        model = build_codeformer(CODEFORMER_512)
    assert layout(model.state_dict()) == read_key_list(KEY_LIST)
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMETERS
    assert not list(model.buffers())


def test_released_format_and_flat_file_reload_strictly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    state = build_codeformer(CODEFORMER_512).state_dict()
    probes = ("position_emb", "quantize.embedding.weight", "fuse_convs_dict.256.shift.2.bias", "ft_layers.8.norm2.bias")
    wrapped, flat = tmp_path / "codeformer.pth", tmp_path / "flat.pth"
    torch.save({"params_ema": state}, wrapped)
    torch.save(state, flat)
    expected = {key: state[key].clone() for key in probes}
    del state
    for path in (wrapped, flat):
        loaded = load_codeformer(path)
        assert loaded.config == CODEFORMER_512
        assert not loaded.training
        assert not any(p.requires_grad for p in loaded.parameters())
        assert not any(t.is_meta for t in loaded.state_dict().values())
        for key, value in expected.items():
            assert torch.equal(loaded.state_dict()[key], value)
        del loaded


def test_reloaded_tiny_model_computes_the_same(tiny_model: CodeFormer, faces: torch.Tensor, tmp_path: Path) -> None:
    path = tmp_path / "tiny.pth"
    torch.save({"params_ema": tiny_model.state_dict()}, path)
    loaded = load_codeformer(path, config=TINY)
    with torch.inference_mode():
        assert torch.equal(loaded(faces, 0.5), tiny_model(faces, 0.5))


def test_renamed_key_is_named_in_the_error(tiny_model: CodeFormer, tmp_path: Path) -> None:
    state = dict(tiny_model.state_dict())
    state["quantize.codebook.weight"] = state.pop("quantize.embedding.weight")
    path = tmp_path / "renamed.pth"
    torch.save({"params_ema": state}, path)
    with pytest.raises(ModelUnavailable, match=r"quantize\.embedding\.weight") as excinfo:
        load_codeformer(path, config=TINY)
    assert excinfo.value.details["missing"] == ["quantize.embedding.weight"]
    assert excinfo.value.details["unexpected"] == ["quantize.codebook.weight"]


def test_wrong_architecture_reports_missing_and_mis_shaped_keys(tiny_model: CodeFormer, tmp_path: Path) -> None:
    path = tmp_path / "tiny.pth"
    torch.save(tiny_model.state_dict(), path)
    with pytest.raises(ModelUnavailable) as excinfo:
        load_codeformer(path)  # the released 512 px architecture
    assert "missing" in excinfo.value.message and "shape mismatches" in excinfo.value.message
    assert "position_emb: file (64, 32) vs model (256, 512)" in excinfo.value.details["shape_mismatches"]


def test_missing_and_corrupt_files_raise_model_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="not found"):
        load_codeformer(tmp_path / "absent.pth")
    path = tmp_path / "corrupt.pth"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelUnavailable, match="cannot read CodeFormer"):
        load_codeformer(path)


def test_forward_shape_and_finite(tiny_model: CodeFormer, faces: torch.Tensor) -> None:
    with torch.inference_mode():
        out = tiny_model(faces, 0.5)
    assert out.shape == faces.shape and out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_fidelity_weight_blends_in_the_encoder_features(tiny_model: CodeFormer, faces: torch.Tensor) -> None:
    with torch.inference_mode():
        enhanced, half, faithful = (tiny_model(faces, w) for w in (0.0, 0.5, 1.0))
    assert (enhanced - faithful).abs().mean().item() > 1e-2
    assert (half - enhanced).abs().mean().item() > 1e-3 and (half - faithful).abs().mean().item() > 1e-3


def test_zero_fidelity_leaves_the_fusion_blocks_unused(faces: torch.Tensor) -> None:
    model, edited = randomized(TINY), randomized(TINY)
    with torch.no_grad():
        for param in edited.fuse_convs_dict.parameters():
            param.mul_(-3.0)
    with torch.inference_mode():
        assert torch.equal(model(faces, 0.0), edited(faces, 0.0))
        assert not torch.allclose(model(faces, 1.0), edited(faces, 1.0), atol=1e-3)


def test_per_face_weights_equal_separate_calls(tiny_model: CodeFormer, faces: torch.Tensor) -> None:
    weights = torch.tensor([0.0, 0.3, 1.0])
    with torch.inference_mode():
        mixed = tiny_model(faces, weights)
        separate = torch.cat([tiny_model(faces[i : i + 1], float(w)) for i, w in enumerate(weights)])
    torch.testing.assert_close(mixed, separate, rtol=1e-5, atol=5e-5)  # float rounding only


def test_batch_equals_single_calls_and_is_deterministic(tiny_model: CodeFormer, faces: torch.Tensor) -> None:
    with torch.inference_mode():
        batched = tiny_model(faces, 0.7)
        singles = torch.cat([tiny_model(faces[i : i + 1], 0.7) for i in range(len(faces))])
        again = tiny_model(faces, 0.7)
    torch.testing.assert_close(batched, singles, rtol=1e-5, atol=5e-5)  # float rounding only
    assert torch.equal(batched, again)


@pytest.mark.parametrize(
    "w",
    [-0.01, 1.01, math.nan, math.inf, True, "0.5", None, torch.tensor([0.5, 0.5]), torch.tensor([[0.5]] * 3)],
    ids=["below", "above", "nan", "inf", "bool", "str", "none", "too-few", "2-d"],
)
def test_out_of_contract_fidelity_weight_is_invalid(tiny_model: CodeFormer, faces: torch.Tensor, w: object) -> None:
    with pytest.raises(InvalidParameter, match="fidelity weight"):
        tiny_model(faces, w)  # type: ignore[arg-type]


def test_fidelity_weight_bounds_and_scalar_tensor_are_accepted(tiny_model: CodeFormer, faces: torch.Tensor) -> None:
    with torch.inference_mode():
        assert torch.equal(tiny_model(faces, 1), tiny_model(faces, torch.tensor(1.0)))
        assert torch.equal(tiny_model(faces, 0), tiny_model(faces, 0.0))


def test_forward_rejects_wrong_input_shape(tiny_model: CodeFormer) -> None:
    with pytest.raises(InvalidParameter, match="expects"):
        tiny_model(torch.zeros(1, 3, TINY.size_px // 2, TINY.size_px // 2), 0.5)
    with pytest.raises(InvalidParameter, match="B ≥ 1"):
        tiny_model(torch.zeros(0, 3, TINY.size_px, TINY.size_px), 0.5)


@pytest.mark.parametrize(
    "changes",
    [{"size_px": 100}, {"base_channels": 48}, {"embed_dim": 33}, {"connect_resolutions": (8,)}, {"n_layers": 0}],
    ids=["size", "groupnorm-width", "heads", "connect-at-code-grid", "layers"],
)
def test_bad_config_is_an_invalid_parameter(changes: dict[str, object]) -> None:
    fields = {**TINY.__dict__, **changes}
    with pytest.raises(InvalidParameter):
        CodeFormerConfig(**fields)  # type: ignore[arg-type]
