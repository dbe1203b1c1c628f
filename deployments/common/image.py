"""The one place where bytes become images and images become bytes.

Image contract inside the service: ``numpy.ndarray`` ``(H, W, 3)``, ``uint8``, **RGB**, C-contiguous, upright
(EXIF orientation already applied). Alpha, when the input had any, travels beside it as ``(H, W)`` ``uint8`` and is
put back on output. Everything else in the code base takes and returns that contract; colour-order conversions for
models (BGR for DCT-Net) happen at the model's edge.

Decoding trusts content, never a file name or a content type: Pillow sniffs the magic bytes, and only the formats in
``ALLOWED_FORMATS`` pass. Limits on bytes and pixels are checked before the pixel data is decoded, so a small file that
claims a huge canvas (a decompression bomb) is refused after reading its header only.
"""

from __future__ import annotations

import io
import logging
import warnings
from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from deployments.common.errors import (
    CorruptImage,
    ImageTooLarge,
    ImageTooManyPixels,
    InvalidParameter,
    UnsupportedImage,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 20 * 1024 * 1024
DEFAULT_MAX_PIXELS = 50_000_000
ALLOWED_FORMATS = frozenset({"JPEG", "MPO", "PNG", "WEBP", "BMP", "TIFF", "GIF"})
SOFTWARE_TAG = "portrait-serve"
# What a model stage's health probe runs: a blank image, which has no face (image contract: HxWx3 uint8 RGB).
PROBE_IMAGE = np.full((64, 64, 3), 128, np.uint8)

OutputFormat = Literal["jpeg", "png", "webp"]
MEDIA_TYPES: dict[str, str] = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}
MAX_SIDE_PX: dict[str, int] = {"jpeg": 65500, "webp": 16383}  # what each format can hold; PNG: 2**31 - 1
_EXIF_SOFTWARE, _EXIF_XRES, _EXIF_YRES, _EXIF_RES_UNIT = 0x0131, 0x011A, 0x011B, 0x0128
# What Pillow raises on a damaged file; TypeError: its TIFF reader on a frame that lacks its dimensions.
_DECODER_ERRORS = (OSError, SyntaxError, ValueError, EOFError, TypeError)
_SCALE_ROWS_PX = 1 << 18  # 16-bit and float images are scaled to 8 bits this many pixels at a time


@dataclass(frozen=True, eq=False)
class DecodedImage:
    """A decoded, upright image plus what must survive to the output (alpha, DPI, ICC profile)."""

    rgb: np.ndarray
    alpha: np.ndarray | None
    format: str
    dpi: tuple[float, float] | None
    icc_profile: bytes | None = None
    animated: bool = False  # more frames than the first (never counted: counting walks the whole file)

    @property
    def width(self) -> int:
        return int(self.rgb.shape[1])

    @property
    def height(self) -> int:
        return int(self.rgb.shape[0])


def decode_image(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    min_side_px: int | None = None,
) -> DecodedImage:
    """Decode ``data`` into the image contract, or raise a typed :class:`InputError`.

    Animated inputs (GIF, APNG, animated WebP) give their first frame; ``animated`` says there were more.
    ``min_side_px``: a job that needs fewer pixels lets a JPEG decode at 1/2, 1/4 or 1/8 scale (the decoder's DCT
    scaling, several times faster on a 12 MP photo) while both sides stay at least this long.
    """
    if not data:
        raise UnsupportedImage("the upload is empty (0 bytes)")
    if len(data) > max_bytes:
        raise ImageTooLarge(
            f"the image has {len(data)} bytes; the limit is {max_bytes}",
            details={"bytes": len(data), "max_bytes": max_bytes},
        )
    image = _open_checked(data, max_pixels)
    try:
        animated = bool(getattr(image, "is_animated", False))  # looks at the second frame, never at the last
        image.seek(0)
        if min_side_px is not None and image.format == "JPEG":
            image.draft(image.mode, (min_side_px, min_side_px))
        image.load()
        upright = ImageOps.exif_transpose(image)
    except _DECODER_ERRORS as exc:
        raise CorruptImage(f"the {image.format} image is damaged or truncated: {exc}") from exc
    rgb, alpha = _to_contract(upright)
    return DecodedImage(
        rgb=rgb,
        alpha=alpha,
        format=str(image.format).lower(),
        dpi=_read_dpi(image),
        icc_profile=image.info.get("icc_profile") or None,
        animated=animated,
    )


def _open_checked(data: bytes, max_pixels: int) -> Image.Image:
    """Open lazily (header only), then enforce format and pixel limits before any pixel is decoded."""
    with warnings.catch_warnings():
        # Our own limit below replaces Pillow's global bomb check, which would only warn below 2x its own limit.
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            image = Image.open(io.BytesIO(data))
        except UnidentifiedImageError as exc:
            raise UnsupportedImage(
                "the upload is not an image in a supported format (JPEG, PNG, WebP, BMP, TIFF, GIF)"
            ) from exc
        except Image.DecompressionBombError as exc:
            raise ImageTooManyPixels(f"the image declares too many pixels: {exc}") from exc
        except (OSError, SyntaxError, ValueError) as exc:
            raise CorruptImage(f"the image header cannot be read: {exc}") from exc
    if image.format not in ALLOWED_FORMATS:
        raise UnsupportedImage(f"image format {image.format} is not supported")
    width, height = image.size
    if width <= 0 or height <= 0:
        raise CorruptImage(f"the image declares an empty canvas ({width}x{height})")
    if width * height > max_pixels:
        raise ImageTooManyPixels(
            f"the image is {width}x{height} = {width * height} pixels; the limit is {max_pixels}",
            details={"width": width, "height": height, "max_pixels": max_pixels},
        )
    return image


def _to_contract(image: Image.Image) -> tuple[np.ndarray, np.ndarray | None]:
    """Any Pillow mode to (RGB uint8, alpha uint8 or None); 16-bit data is scaled, not clipped."""
    mode = image.mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        values = np.asarray(image)  # in its own type: a 50 MP float64 copy would be 400 MB
        top = float(values.max(initial=0))
        if mode == "F":
            scale = 255.0 if top <= 1.0 else 1.0
        else:
            scale = 255.0 / (65535.0 if mode.startswith("I;16") or top > 255 else 255.0)
        gray = _scaled_to_uint8(values, scale)
        return np.ascontiguousarray(np.repeat(gray[..., None], 3, axis=2)), None
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in image.info)
    if has_alpha:
        rgba = np.asarray(image.convert("RGBA"))
        return np.ascontiguousarray(rgba[..., :3]), np.ascontiguousarray(rgba[..., 3])
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))), None


def _scaled_to_uint8(values: np.ndarray, scale: float) -> np.ndarray:
    """``round(values * scale)`` clipped to 0..255, a band of rows at a time (the float temporaries stay small)."""
    gray = np.empty(values.shape, dtype=np.uint8)
    rows = max(1, _SCALE_ROWS_PX // max(1, values.shape[1]))
    for top in range(0, values.shape[0], rows):
        band = values[top : top + rows].astype(np.float64) * scale
        gray[top : top + rows] = np.clip(np.rint(band), 0, 255)
    return gray


def _read_dpi(image: Image.Image) -> tuple[float, float] | None:
    dpi = image.info.get("dpi")
    if not dpi:
        return None
    x_dpi, y_dpi = float(dpi[0]), float(dpi[1])
    return (x_dpi, y_dpi) if x_dpi > 0 and y_dpi > 0 else None


def encode_image(
    rgb: np.ndarray,
    fmt: OutputFormat,
    *,
    alpha: np.ndarray | None = None,
    dpi: tuple[float, float] | None = None,
    quality: int = 92,
    subsampling: str | None = None,
    icc_profile: bytes | None = None,
    software: str = SOFTWARE_TAG,
) -> bytes:
    """Encode the image contract to ``fmt`` with DPI (PNG pHYs, JPEG JFIF + EXIF) and an EXIF ``Software`` tag.

    JPEG has no alpha channel, so alpha is dropped there; PNG and WebP keep it. A result longer than the format can
    hold (:data:`MAX_SIDE_PX`) is the caller's choice of format: 422 naming the limit.
    """
    _check_side(rgb, fmt)
    image = _from_contract(rgb, alpha if fmt != "jpeg" else None)
    exif = Image.Exif()
    exif[_EXIF_SOFTWARE] = software
    options: dict = {"exif": exif.tobytes()}
    if dpi is not None:
        options["dpi"] = (float(dpi[0]), float(dpi[1]))
        exif[_EXIF_XRES], exif[_EXIF_YRES], exif[_EXIF_RES_UNIT] = float(dpi[0]), float(dpi[1]), 2
        options["exif"] = exif.tobytes()
    if icc_profile:
        options["icc_profile"] = icc_profile
    if fmt == "jpeg":
        if not 1 <= quality <= 100:
            raise InvalidParameter(f"JPEG quality must be within 1..100, got {quality}")
        options.update(quality=quality, optimize=True)
        if subsampling is not None:
            if subsampling not in _SUBSAMPLING:
                raise InvalidParameter(f"subsampling must be one of {sorted(_SUBSAMPLING)}, got {subsampling!r}")
            options["subsampling"] = _SUBSAMPLING[subsampling]
        pil_format = "JPEG"
    elif fmt == "png":
        options["compress_level"] = 6
        pil_format = "PNG"
    elif fmt == "webp":
        options.update(quality=quality, method=4)
        pil_format = "WEBP"
    else:
        raise InvalidParameter(f"output format must be one of {sorted(MEDIA_TYPES)}, got {fmt!r}")
    buffer = io.BytesIO()
    try:
        image.save(buffer, format=pil_format, **options)
    except OSError:
        if not options.get("optimize"):
            raise
        # Pillow sizes libjpeg's buffer for optimized Huffman tables at W*H bytes; noisy photos at high quality
        # compress to more than that. Encode again with standard tables (a few percent larger, always fits).
        buffer = io.BytesIO()
        image.save(buffer, format=pil_format, **{**options, "optimize": False})
    return buffer.getvalue()


def _check_side(rgb: np.ndarray, fmt: str) -> None:
    limit = MAX_SIDE_PX.get(fmt)
    height, width = rgb.shape[:2]
    if limit is not None and max(width, height) > limit:
        raise InvalidParameter(
            f"a {fmt} image is at most {limit} px a side and this result is {width}x{height}: "
            "ask for format png, or for a smaller result",
            details={"field": "format", "max_side_px": limit, "width": width, "height": height},
        )


def require_image(image: object, *, what: str = "image", min_side_px: int = 1) -> None:
    """Refuse anything that is not the image contract (HxWx3 uint8), with a message naming ``what`` was wrong."""
    shape = getattr(image, "shape", None)
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        raise InvalidParameter(f"{what}: expected an HxWx3 uint8 array, got shape {shape} ({type(image).__name__})")
    if image.dtype != np.uint8:
        raise InvalidParameter(f"{what}: expected uint8 pixels, got {image.dtype}")
    if min(image.shape[:2]) < min_side_px:
        raise InvalidParameter(f"{what}: {image.shape[1]}x{image.shape[0]} is smaller than {min_side_px} px a side")


def _from_contract(rgb: np.ndarray, alpha: np.ndarray | None) -> Image.Image:
    require_image(rgb)
    if alpha is None:
        return Image.fromarray(np.ascontiguousarray(rgb), "RGB")
    if alpha.shape != rgb.shape[:2]:
        raise InvalidParameter(f"alpha shape {alpha.shape} does not match the image {rgb.shape[:2]}")
    rgba = np.dstack([rgb, alpha.astype(np.uint8)])
    return Image.fromarray(np.ascontiguousarray(rgba), "RGBA")


def resize_alpha(alpha: np.ndarray | None, width_px: int, height_px: int) -> np.ndarray | None:
    """Carry an input's alpha to an output of another size (upscaled restorations, resized cartoons)."""
    if alpha is None or alpha.shape == (height_px, width_px):
        return alpha
    return cv2.resize(alpha, (width_px, height_px), interpolation=cv2.INTER_LINEAR)
