"""Real-ESRGAN RRDBNet: official key layout (×4 and ×2), strict loading, scale from the file, and tiled upscaling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.restore.realesrgan import (
    REALESRGAN_VARIANTS,
    RrdbConfig,
    RrdbNet,
    build_realesrgan,
    infer_rrdb_config,
    load_realesrgan,
    output_to_rgb,
    rgb_to_input,
    upscale_image_realesrgan,
)

KEY_LISTS = Path(__file__).resolve().parents[2] / "data" / "realesrgan"
# Parameter counts of the official BasicSR RRDBNet (also in the key lists' headers).
OFFICIAL_PARAMETERS = {"realesrgan-x4plus": 16_697_987, "realesrgan-x2plus": 16_703_171}
CPU = torch.device("cpu")
# One RRDB is 15 chained 3×3 convs; with conv_first and conv_body that is 17 px of reach at the trunk's resolution,
# plus at most 2 from the convs after the two ×2 upsamplings: 19 trunk pixels, i.e. 19·unshuffle input pixels.
TINY_REACH_TRUNK_PX = 19


def tiny_config(scale: int) -> RrdbConfig:
    return RrdbConfig(scale=scale, num_feat=8, num_block=1, num_grow_ch=4)


def lively_rrdbnet(config: RrdbConfig, seed: int = 0) -> RrdbNet:
    """Random weights leave the output near 0 (clamped to black); spread it around mid-grey instead."""
    torch.manual_seed(seed)
    model = build_realesrgan(config).eval().requires_grad_(False)
    model.conv_last.weight.mul_(8.0)
    model.conv_last.bias.fill_(0.5)
    return model


def photo_crop(height: int, width: int) -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(data.astronaut()[60 : 60 + height, 180 : 180 + width])


def forward_rgb(model: RrdbNet, rgb: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return output_to_rgb(model(rgb_to_input(rgb[None], device=CPU)))[0]


def read_key_list(variant: str) -> list[tuple[str, tuple[int, ...]]]:
    entries = []
    for line in (KEY_LISTS / f"{variant.replace('-', '_')}_keys.txt").read_text().splitlines():
        if line.startswith("#"):
            continue
        key, shape = line.split("\t")
        entries.append((key, tuple(int(dim) for dim in shape.split(","))))
    return entries


@pytest.fixture(scope="module", params=[4, 2], ids=["x4", "x2"])
def tiny_model(request: pytest.FixtureRequest) -> RrdbNet:
    return lively_rrdbnet(tiny_config(request.param))


@pytest.mark.parametrize("variant", sorted(REALESRGAN_VARIANTS))
def test_official_variant_layout_and_strict_reload(variant: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = build_realesrgan(REALESRGAN_VARIANTS[variant])
    state = model.state_dict()
    assert [(key, tuple(value.shape)) for key, value in state.items()] == read_key_list(variant)
    assert sum(p.numel() for p in model.parameters()) == OFFICIAL_PARAMETERS[variant]
    path = tmp_path / "released.pth"
    torch.save({"params_ema": state}, path)
    del model
    loaded = load_realesrgan(path)
    assert loaded.config == REALESRGAN_VARIANTS[variant]
    assert loaded.scale == REALESRGAN_VARIANTS[variant].scale
    assert not loaded.training and not any(p.requires_grad for p in loaded.parameters())
    assert not any(t.is_meta for t in loaded.state_dict().values())
    for key in ("conv_first.weight", "body.22.rdb3.conv5.bias", "conv_last.weight"):
        assert torch.equal(loaded.state_dict()[key], state[key])


@pytest.mark.parametrize("layout", ["params_ema", "params", "both", "flat"])
def test_every_basicsr_layout_loads_and_round_trips(layout: str, tmp_path: Path) -> None:
    model = lively_rrdbnet(tiny_config(4))
    state = model.state_dict()
    decoy = {key: torch.zeros_like(value) for key, value in state.items()}
    saved = {"params_ema": {"params_ema": state}, "params": {"params": state}, "flat": state}.get(
        layout,
        {"params": decoy, "params_ema": state},  # both: params_ema wins, as in RealESRGANer
    )
    path = tmp_path / f"{layout}.pth"
    torch.save(saved, path)
    loaded = load_realesrgan(path)
    x = torch.rand(1, 3, 12, 10)
    with torch.inference_mode():
        assert torch.equal(loaded(x), model(x))


@pytest.mark.parametrize(("scale", "in_channels"), [(4, 3), (2, 12), (1, 48)])
def test_scale_is_read_from_the_checkpoint(scale: int, in_channels: int, tmp_path: Path) -> None:
    config = RrdbConfig(scale=scale, num_feat=8, num_block=2, num_grow_ch=4)
    state = build_realesrgan(config).state_dict()
    assert state["conv_first.weight"].shape[1] == in_channels
    assert infer_rrdb_config(state) == config
    path = tmp_path / "net.pth"
    torch.save({"params_ema": state}, path)
    loaded = load_realesrgan(path)
    assert loaded.scale == scale and loaded.input_multiple_px == {4: 1, 2: 2, 1: 4}[scale]
    assert load_realesrgan(path, scale=scale).scale == scale
    with pytest.raises(ModelUnavailable, match=f"is a ×{scale} network, expected ×3"):
        load_realesrgan(path, scale=3)


def test_forward_shapes_and_the_unshuffle_granularity(tiny_model: RrdbNet) -> None:
    scale = tiny_model.scale
    x = torch.rand(2, 3, 10, 6)
    with torch.inference_mode():
        assert tiny_model(x).shape == (2, 3, 10 * scale, 6 * scale)
    with pytest.raises(InvalidParameter, match="expects"):
        tiny_model(torch.rand(1, 4, 10, 6))
    if scale == 2:
        with pytest.raises(InvalidParameter, match="multiples of 2"):
            tiny_model(torch.rand(1, 3, 9, 6))


def test_edited_state_dict_names_the_keys(tmp_path: Path) -> None:
    state = dict(lively_rrdbnet(tiny_config(2)).state_dict())
    state["conv_extra.weight"] = state.pop("conv_hr.weight")
    state["conv_up1.bias"] = torch.zeros(9)
    path = tmp_path / "edited.pth"
    torch.save({"params_ema": state}, path)
    with pytest.raises(ModelUnavailable, match=r"conv_hr\.weight") as excinfo:
        load_realesrgan(path)
    assert excinfo.value.details["unexpected"] == ["conv_extra.weight"]
    assert excinfo.value.details["shape_mismatches"] == ["conv_up1.bias: file (9,) vs model (8,)"]


def test_files_that_are_not_an_rrdbnet_raise_model_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "other.pth"
    with pytest.raises(ModelUnavailable, match="not found"):
        load_realesrgan(path)
    torch.save({"params": {"weight": torch.zeros(1)}}, path)
    with pytest.raises(ModelUnavailable, match="cannot infer"):
        load_realesrgan(path)
    state = build_realesrgan(tiny_config(4)).state_dict()
    state["conv_first.weight"] = torch.zeros(8, 6, 3, 3)
    torch.save(state, path)
    with pytest.raises(ModelUnavailable, match="conv_first takes 6 channels"):
        load_realesrgan(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelUnavailable, match="cannot read"):
        load_realesrgan(path)


def test_pre_and_post_processing_are_those_of_realesrganer() -> None:
    pixels = np.array([[[[0, 128, 255]]]], dtype=np.uint8)
    assert torch.equal(rgb_to_input(pixels, device=CPU), torch.tensor([0.0, 128.0, 255.0]).div(255.0).view(1, 3, 1, 1))
    out = torch.tensor([-0.2, 0.5, 1.3, 0.5 / 255, 1.5 / 255, 2.5 / 255]).view(1, 6, 1, 1)
    # clamp to [0, 1], ×255, round half to even (numpy's round, as RealESRGANer)
    assert output_to_rgb(out).ravel().tolist() == [0, 128, 255, 0, 2, 2]


def test_reach_of_the_tiny_network(tiny_model: RrdbNet) -> None:
    """The overlap the exactness tests below rely on: one input pixel changes no output beyond this reach."""
    reach_px = TINY_REACH_TRUNK_PX * tiny_model.input_multiple_px
    size_px = 2 * reach_px + 2 * tiny_model.input_multiple_px + 8
    x = torch.rand(1, 3, size_px, size_px)
    bumped = x.clone()
    bumped[0, :, size_px // 2, size_px // 2] += 1.0
    with torch.inference_mode():
        changed = (tiny_model(bumped) - tiny_model(x)).abs().amax(dim=(0, 1)) > 0
    rows = changed.any(dim=1).nonzero().ravel() // tiny_model.scale
    assert rows.min() >= size_px // 2 - reach_px and rows.max() <= size_px // 2 + reach_px
    assert rows.max() - rows.min() >= reach_px  # the reach is real, not an overestimate by much


def test_the_test_network_output_is_not_clamped_flat(tiny_model: RrdbNet) -> None:
    out = forward_rgb(tiny_model, photo_crop(24, 20))
    assert len(np.unique(out)) > 50
    assert np.mean((out == 0) | (out == 255)) < 0.05


@pytest.mark.parametrize(
    ("height", "width", "tile_trunk_px", "batch_size"),
    [(45, 37, 8, 1), (45, 37, 16, 3), (64, 40, 32, 8), (11, 7, 16, 2)],
    ids=["odd-small-tiles", "odd-batched", "even-one-row", "smaller-than-a-tile"],
)
def test_tiled_upscale_equals_one_forward_over_the_reflected_image(
    tiny_model: RrdbNet, height: int, width: int, tile_trunk_px: int, batch_size: int
) -> None:
    """With the overlap covering the network's reach, tiling changes nothing: the result is one forward pass over the
    image reflected by the overlap (and up to the unshuffle multiple), cropped to the image."""
    multiple, scale = tiny_model.input_multiple_px, tiny_model.scale
    overlap_px = (TINY_REACH_TRUNK_PX + 1) * multiple
    rgb = photo_crop(height, width)
    tiled = upscale_image_realesrgan(
        tiny_model, rgb, tile_px=tile_trunk_px * multiple, overlap_px=overlap_px, batch_size=batch_size
    )
    padded = np.pad(
        rgb,
        ((overlap_px, overlap_px + (-height) % multiple), (overlap_px, overlap_px + (-width) % multiple), (0, 0)),
        mode="reflect",
    )
    whole = forward_rgb(tiny_model, padded)[overlap_px * scale :, overlap_px * scale :][
        : height * scale, : width * scale
    ]
    assert tiled.shape == (height * scale, width * scale, 3) and tiled.dtype == np.uint8
    difference = np.abs(tiled.astype(np.int16) - whole)
    assert difference.max() <= 1
    assert np.mean(difference > 0) < 0.001


def test_upscale_refuses_bad_arguments(tiny_model: RrdbNet) -> None:
    with pytest.raises(InvalidParameter, match="batch_size"):
        upscale_image_realesrgan(tiny_model, photo_crop(8, 8), batch_size=0)
    with pytest.raises(InvalidParameter):
        upscale_image_realesrgan(tiny_model, np.zeros((8, 8, 3), np.float32))
