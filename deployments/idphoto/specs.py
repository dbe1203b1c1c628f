"""ID-photo presets as data: ``configs/id_specs.yaml`` becomes frozen :class:`IdSpec` records.

Presets live in YAML so a new document size is a data change, not a code change. Sizes may be given in pixels, in
millimetres plus DPI, or both (issuers often state both); head and margin ranges may be fractions of the height or
millimetres. Everything is normalised here to pixels and height fractions, the units the geometry works in.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deployments.common.errors import InvalidParameter

MM_PER_INCH = 25.4
DEFAULT_SPECS_PATH = Path(__file__).resolve().parents[2] / "configs" / "id_specs.yaml"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{1,40}$")


@dataclass(frozen=True)
class IdSpec:
    """One photo standard: exact output size, print DPI and the ranges the subject must fall in."""

    slug: str
    name: str
    name_en: str
    width_px: int
    height_px: int
    dpi: float
    head_height: tuple[float, float]
    top_margin: tuple[float, float]
    background: str
    width_mm: float | None = None
    height_mm: float | None = None
    aliases: tuple[str, ...] = ()  # other names people write for it (plain-language requests match them)
    faces: int = 1  # people in the photo (a marriage-registration photo shows two)

    @property
    def size_mm(self) -> tuple[float, float]:
        """Physical size; derived from pixels and DPI when the issuer gave pixels only."""
        return (
            self.width_mm if self.width_mm is not None else self.width_px / self.dpi * MM_PER_INCH,
            self.height_mm if self.height_mm is not None else self.height_px / self.dpi * MM_PER_INCH,
        )

    def to_json(self) -> dict[str, Any]:
        width_mm, height_mm = self.size_mm
        return {
            "slug": self.slug,
            "name": self.name,
            "name_en": self.name_en,
            "width_px": self.width_px,
            "height_px": self.height_px,
            "width_mm": round(width_mm, 2),
            "height_mm": round(height_mm, 2),
            "dpi": self.dpi,
            "head_height": list(self.head_height),
            "top_margin": list(self.top_margin),
            "background": self.background,
            "aliases": list(self.aliases),
            "faces": self.faces,
        }


def mm_to_px(mm: float, dpi: float) -> int:
    return int(round(mm / MM_PER_INCH * dpi))


def load_specs(path: Path | str = DEFAULT_SPECS_PATH) -> dict[str, IdSpec]:
    """Read and check every preset; a bad entry fails loudly at start-up rather than on a request."""
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    defaults = raw.get("defaults", {})
    return {slug: _spec_from_entry(slug, entry, defaults) for slug, entry in raw["specs"].items()}


@functools.cache
def default_specs() -> Mapping[str, IdSpec]:
    """The presets shipped in ``configs/id_specs.yaml``, loaded once per process."""
    return load_specs(DEFAULT_SPECS_PATH)


def custom_spec(
    *,
    width_px: int | None = None,
    height_px: int | None = None,
    width_mm: float | None = None,
    height_mm: float | None = None,
    dpi: float = 300.0,
    head_height: tuple[float, float] = (0.55, 0.70),
    top_margin: tuple[float, float] = (0.06, 0.12),
    background: str = "white",
) -> IdSpec:
    """A spec for a size no preset covers (pixels, or millimetres plus DPI)."""
    entry: dict[str, Any] = {
        "name": "自定义",
        "name_en": "Custom",
        "dpi": dpi,
        "head_height": list(head_height),
        "top_margin": list(top_margin),
        "background": background,
    }
    for key, value in (
        ("width_px", width_px),
        ("height_px", height_px),
        ("width_mm", width_mm),
        ("height_mm", height_mm),
    ):
        if value is not None:
            entry[key] = value
    return _spec_from_entry("custom", entry, {})


def _spec_from_entry(slug: str, entry: Mapping[str, Any], defaults: Mapping[str, Any]) -> IdSpec:
    if not _SLUG.match(slug):
        raise InvalidParameter(f"preset slug {slug!r} must be lower-case letters, digits and '-'")
    merged = {**defaults, **entry}
    dpi = float(merged.get("dpi", 300))
    width_mm, height_mm = merged.get("width_mm"), merged.get("height_mm")
    width_px = merged.get("width_px") or (mm_to_px(width_mm, dpi) if width_mm else None)
    height_px = merged.get("height_px") or (mm_to_px(height_mm, dpi) if height_mm else None)
    if not width_px or not height_px:
        raise InvalidParameter(f"preset {slug}: give width_px/height_px or width_mm/height_mm")
    actual_height_mm = float(height_mm) if height_mm else height_px / dpi * MM_PER_INCH
    head = _fraction_range(slug, merged, "head_height", actual_height_mm)
    top = _fraction_range(slug, merged, "top_margin", actual_height_mm)
    return IdSpec(
        slug=slug,
        name=str(merged.get("name", slug)),
        name_en=str(merged.get("name_en", slug)),
        width_px=int(width_px),
        height_px=int(height_px),
        dpi=dpi,
        head_height=head,
        top_margin=top,
        background=str(merged.get("background", "white")),
        width_mm=float(width_mm) if width_mm else None,
        height_mm=float(height_mm) if height_mm else None,
        aliases=tuple(str(alias) for alias in entry.get("aliases", ())),
        faces=_face_count(slug, merged.get("faces", 1)),
    )


def _face_count(slug: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 4:
        raise InvalidParameter(f"preset {slug}: faces must be a whole number from 1 to 4, got {value!r}")
    return value


def _fraction_range(slug: str, entry: Mapping[str, Any], key: str, height_mm: float) -> tuple[float, float]:
    """``key`` as a fraction range, converting ``key_mm`` when the issuer states millimetres."""
    if f"{key}_mm" in entry:
        low_mm, high_mm = entry[f"{key}_mm"]
        low, high = low_mm / height_mm, high_mm / height_mm
    else:
        low, high = entry[key]
    if not 0.0 <= low < high < 1.0:
        raise InvalidParameter(f"preset {slug}: {key} range [{low}, {high}] must satisfy 0 <= min < max < 1")
    return (round(float(low), 4), round(float(high), 4))
