"""Presets are self-consistent data; params validate once, with clear messages."""

from __future__ import annotations

import pytest

from deployments.common.errors import InvalidParameter
from deployments.idphoto.params import IdPhotoParams, parse_colour, parse_params
from deployments.idphoto.specs import MM_PER_INCH, custom_spec, load_specs

REQUIRED = {
    "cn-1inch": (295, 413),
    "cn-2inch": (413, 579),
    "cn-id-card": (358, 441),
    "cn-cet": (144, 192),
    "us-passport": (600, 600),
}


def test_presets_are_many_and_self_consistent(specs):
    assert len(specs) >= 25
    for slug, spec in specs.items():
        assert spec.slug == slug
        assert spec.width_px > 0 and spec.height_px > 0 and 72 <= spec.dpi <= 1200
        if spec.width_mm is not None:
            assert abs(spec.width_mm / MM_PER_INCH * spec.dpi - spec.width_px) <= 2, slug
            assert abs(spec.height_mm / MM_PER_INCH * spec.dpi - spec.height_px) <= 2, slug
        head_low, head_high = spec.head_height
        top_low, top_high = spec.top_margin
        assert 0.2 <= head_low < head_high < 0.9, slug
        assert 0.0 <= top_low < top_high < 0.3, slug
        # The tallest allowed head under the largest allowed margin must still leave the chin inside the photo.
        assert top_high + head_high < 1.0, slug
        assert spec.name and spec.name_en
        parse_colour(spec.background)


def test_required_presets_have_the_documented_numbers(specs):
    for slug, size in REQUIRED.items():
        assert (specs[slug].width_px, specs[slug].height_px) == size
    passport = specs["cn-passport"]
    assert (passport.width_mm, passport.height_mm) == (33, 48)
    assert specs["us-passport"].head_height == (0.5, 0.69)
    icao = specs["icao-35x45"]
    assert icao.head_height == (round(32 / 45, 4), round(36 / 45, 4))
    assert (specs["ca-passport"].width_mm, specs["ca-passport"].height_mm) == (50, 70)
    for slug in (
        "cn-social-security",
        "cn-driving-licence",
        "cn-teacher-cert",
        "cn-civil-service-exam",
        "cn-computer-rank-exam",
        "cn-postgraduate-exam",
        "eu-schengen-visa",
        "uk-passport",
        "jp-passport",
        "kr-passport",
        "in-passport",
        "au-passport",
        "cn-1inch-small",
        "cn-1inch-large",
        "cn-2inch-small",
        "cn-2inch-large",
        "cn-5inch",
    ):
        assert slug in specs


def test_load_specs_rejects_a_bad_range(tmp_path):
    path = tmp_path / "specs.yaml"
    path.write_text("specs:\n  bad: {width_px: 100, height_px: 100, head_height: [0.8, 0.5], top_margin: [0.1, 0.2]}\n")
    with pytest.raises(InvalidParameter, match="head_height"):
        load_specs(path)


def test_custom_spec_from_millimetres():
    spec = custom_spec(width_mm=35, height_mm=45, dpi=600)
    assert (spec.width_px, spec.height_px) == (827, 1063)


def test_defaults_and_alias():
    params = IdPhotoParams.model_validate({"return": "json"})
    assert params.return_ == "json"
    assert params.resolve_spec().slug == "cn-1inch"
    assert params.background_colour(params.resolve_spec()) == "#628bce"
    assert params.lighting == "gentle" and params.strict is False and params.lang == "en"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("white", "#ffffff"),
        ("blue", "#628bce"),
        ("red", "#d74532"),
        ("628BCE", "#628bce"),
        ("#abc", "#aabbcc"),
        ("transparent", "transparent"),
    ],
)
def test_colours(raw, expected):
    assert parse_colour(raw) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"spec": "cn-1inch", "width_px": 300, "height_px": 400}, "exclude each other"),
        ({"width_px": 300}, "go together"),
        ({"width_px": 300, "height_px": 400, "width_mm": 30, "height_mm": 40}, "not both"),
        ({"spec": "nope"}, "unknown spec"),
        ({"background": "blurple"}, "not a colour"),
        ({"background": "transparent"}, "needs format=png"),
        ({"background": "transparent", "format": "png", "render": "radial"}, "needs a colour background"),
        ({"format": "png", "max_kb": 50}, "jpeg only"),
        ({"min_kb": 50, "max_kb": 20}, "must not exceed"),
        ({"cut_lines": True}, "needs a layout"),
        ({"spec": "cn-1inch", "dpi": 600}, "preset carries its own DPI"),
        ({"colour": "red"}, "colour"),
        ({"layout": "8inch"}, "layout"),
        ({"lighting": "bright"}, "lighting"),
        ({"lang": "fr"}, "lang"),
    ],
)
def test_invalid_options_are_refused_clearly(data, message):
    with pytest.raises(InvalidParameter, match=message):
        parse_params(data)


def test_custom_size_and_ratio_overrides():
    params = parse_params({"width_px": 400, "height_px": 500, "dpi": 350, "head_ratio": 0.6, "top_ratio": 0.1})
    spec = params.resolve_spec()
    assert (spec.width_px, spec.height_px, spec.dpi) == (400, 500, 350)
    assert spec.head_height == (0.58, 0.62) and spec.top_margin == (0.08, 0.12)


@pytest.mark.parametrize(
    ("raw", "mode"),
    [(True, "gentle"), ("true", "gentle"), (False, "off"), ("0", "off"), ("full", "full"), ("gentle", "gentle")],
)
def test_lighting_takes_its_modes_and_the_former_booleans(raw, mode):
    assert parse_params({"lighting": raw}).lighting == mode


def test_hivision_sizes_and_the_marriage_photo_are_presets(specs):
    """Every size of HivisionIDPhotos' size_list_CN.csv (its 2-inch 626x413 is its large 2-inch) has a preset."""
    hivision = {(295, 413), (413, 626), (260, 378), (413, 531), (390, 567), (1050, 1499), (144, 192), (531, 709)}
    hivision |= {(358, 441), (600, 600)}
    assert hivision <= {(spec.width_px, spec.height_px) for spec in specs.values()}
    assert (specs["jp-visa"].width_px, specs["jp-visa"].height_px) == (295, 413)
    assert (specs["kr-visa"].width_px, specs["kr-visa"].height_px) == (413, 531)
    assert "电子驾驶证" in specs["cn-driving-licence"].aliases
    marriage = specs["cn-marriage"]
    assert (marriage.width_px, marriage.height_px, marriage.faces, marriage.background) == (626, 413, 2, "red")
    assert all(spec.faces == 1 for slug, spec in specs.items() if slug != "cn-marriage")
