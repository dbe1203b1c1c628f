"""DDColor: official key layouts, strict loading of the released formats, variant detection, the forward contract.

Equality with the official ``DDColor`` output on random weights is shown outside the repository (docs/BENCHMARKS.md);
here the tests pin what that comparison relies on: the layout, the loading and which entries the output depends on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deployments.colorize.ddcolor import DDColor, build_ddcolor, load_ddcolor
from deployments.common.errors import InvalidParameter, ModelUnavailable
from tests.ddcolor_samples import randomized_ddcolor
from tests.key_lists import KEY_LISTS, layout, read_key_list

OFFICIAL_PARAMETERS = {"tiny": 55_006_640, "large": 227_869_328}  # buffers excluded
# Entries of the released files the official forward never lets reach its output, found by poisoning each entry of
# the official model in turn (NaN, or a huge count) and comparing outputs: the classifier's final LayerNorm (computed
# by ConvNeXt.forward_features, then discarded) and BatchNorm's step counters (read only in training).
OUTPUT_INDEPENDENT_SUFFIXES = ("num_batches_tracked",)
OUTPUT_INDEPENDENT = ("encoder.arch.norm.weight", "encoder.arch.norm.bias")
SIZE_PX = 64


@pytest.fixture(scope="module")
def tiny_model() -> DDColor:
    return randomized_ddcolor("tiny")


def gray_images(batch: int, size_px: int = SIZE_PX, seed: int = 0) -> torch.Tensor:
    gray = torch.rand(batch, 1, size_px, size_px, generator=torch.Generator().manual_seed(seed))
    return gray.expand(-1, 3, -1, -1).contiguous()


@pytest.mark.parametrize("variant", ["tiny", "large"])
def test_layout_is_the_official_one_in_order(variant: str) -> None:
    with torch.device("meta"):
        model = build_ddcolor(variant)
    assert layout(model.state_dict()) == read_key_list(KEY_LISTS / "ddcolor" / f"ddcolor_{variant}_keys.txt")
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMETERS[variant]


def test_loads_wrapped_and_bare_files_strictly_with_head_cls_ignored(tiny_model: DDColor, tmp_path: Path) -> None:
    state = tiny_model.state_dict()
    head = {"encoder.arch.head_cls.weight": torch.ones(4, 768), "encoder.arch.head_cls.bias": torch.ones(4)}
    with_head = {**state, **head}
    x = gray_images(1)
    with torch.inference_mode():
        expected = tiny_model(x)
    for name, content in {"params": {"params": with_head}, "bare": state}.items():
        path = tmp_path / f"{name}.pth"
        torch.save(content, path)
        loaded = load_ddcolor(path)
        path.unlink()
        assert loaded.variant.name == "tiny" and not loaded.training
        assert not any(p.requires_grad for p in loaded.parameters())
        assert layout(loaded.state_dict()) == layout(state)
        with torch.inference_mode():
            assert torch.equal(loaded(x), expected)
        del loaded


def test_variant_names_agree_with_the_tensors_or_raise(tiny_model: DDColor, tmp_path: Path) -> None:
    path = tmp_path / "tiny.pth"
    torch.save({"params": tiny_model.state_dict()}, path)
    assert load_ddcolor(path, "tiny").variant.name == "tiny"
    assert load_ddcolor(path, "ddcolor_paper_tiny").variant.name == "tiny"
    for wrong in ("large", "ddcolor_modelscope"):
        with pytest.raises(ModelUnavailable, match=f"holds the tiny network, not '{wrong}'"):
            load_ddcolor(path, wrong)
    with pytest.raises(InvalidParameter, match="unknown DDColor variant 'huge'"):
        load_ddcolor(path, "huge")


def test_edited_files_name_the_offending_keys(tiny_model: DDColor, tmp_path: Path) -> None:
    state = dict(tiny_model.state_dict())
    state["decoder.extra.weight"] = state.pop("decoder.last_shuf.conv.0.weight_u")
    state["refine_net.0.0.bias"] = torch.zeros(3)
    path = tmp_path / "edited.pth"
    torch.save({"params": state}, path)
    with pytest.raises(ModelUnavailable, match="does not match DDColor-tiny") as excinfo:
        load_ddcolor(path)
    assert excinfo.value.details["missing"] == ["decoder.last_shuf.conv.0.weight_u"]
    assert excinfo.value.details["unexpected"] == ["decoder.extra.weight"]
    assert excinfo.value.details["shape_mismatches"] == ["refine_net.0.0.bias: file (3,) vs model (2,)"]
    stemless = {k: v for k, v in state.items() if not k.startswith("encoder.arch.downsample_layers.0.0")}
    torch.save(stemless, path)
    with pytest.raises(ModelUnavailable, match="cannot tell the variant"):
        load_ddcolor(path)
    with pytest.raises(ModelUnavailable, match="not found"):
        load_ddcolor(tmp_path / "absent.pth")


def test_forward_contract(tiny_model: DDColor) -> None:
    x = gray_images(2)
    with torch.inference_mode():
        ab = tiny_model(x)
        single = tiny_model(x[1:])
    assert ab.shape == (2, 2, SIZE_PX, SIZE_PX) and ab.dtype == torch.float32
    assert torch.isfinite(ab).all()
    assert (ab[0] - ab[1]).abs().max().item() > 1e-3  # the output depends on the input
    assert (ab[1] - single[0]).abs().max().item() < 1e-4  # batch items are independent
    with torch.inference_mode():
        wide = tiny_model(gray_images(1, 96)[..., :64])  # H ≠ W is fine
    assert wide.shape == (1, 2, 96, 64)
    for bad in (torch.zeros(1, 3, 48, 64), torch.zeros(1, 1, 64, 64), torch.zeros(0, 3, 64, 64)):
        with pytest.raises(InvalidParameter, match="multiples of 32"):
            tiny_model(bad)


def test_spectral_norm_uses_the_stored_vectors(tiny_model: DDColor) -> None:
    """σ comes from the checkpoint's ``weight_u``/``weight_v`` as stored (no power iteration), as in eval mode."""
    conv = tiny_model.refine_net[0][0]
    sigma = torch.dot(conv.weight_u, conv.weight_orig.flatten(1) @ conv.weight_v)
    assert torch.allclose(conv.weight(), conv.weight_orig / sigma)
    reference = torch.nn.utils.spectral_norm(torch.nn.Conv2d(103, 2, 1)).eval()
    with torch.no_grad():
        reference.weight_orig.copy_(conv.weight_orig)
        reference.weight_u.copy_(conv.weight_u)
        reference.weight_v.copy_(conv.weight_v)
        reference.bias.copy_(conv.bias)
        probe = torch.randn(1, 103, 4, 4)
        assert torch.allclose(reference(probe), conv(probe), atol=1e-6)


def test_only_the_listed_entries_leave_the_output_unchanged(tiny_model: DDColor) -> None:
    x = gray_images(1, 32)
    with torch.inference_mode():
        base = tiny_model(x)
    tensors = dict(tiny_model.named_parameters()) | dict(tiny_model.named_buffers())
    unchanged = []
    for key, tensor in tensors.items():
        saved = tensor.clone()
        with torch.inference_mode():
            tensor.fill_(float("nan") if tensor.is_floating_point() else 987_654)
            poisoned = tiny_model(x)
            tensor.copy_(saved)
        if torch.equal(poisoned, base):
            unchanged.append(key)
    expected = [key for key in tensors if key in OUTPUT_INDEPENDENT or key.endswith(OUTPUT_INDEPENDENT_SUFFIXES)]
    assert unchanged == expected
    assert len(expected) == 2 + 9  # 9 BatchNorms in the U-Net
