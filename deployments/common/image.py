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

OutputFormat = Literal["jpeg", "png", "webp"]
MEDIA_TYPES: dict[str, str] = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
_SUBSAMPLING = {"4:4:4": 0, "4:2:2": 1, "4:2:0": 2}
_EXIF_SOFTWARE, _EXIF_XRES, _EXIF_YRES, _EXIF_RES_UNIT = 0x0131, 0x011A, 0x011B, 0x0128


@dataclass(frozen=True, eq=False)
class DecodedImage:
    """A decoded, upright image plus what must survive to the output (alpha, DPI, ICC profile)."""

    rgb: np.ndarray
    alpha: np.ndarray | None
    format: str
    dpi: tuple[float, float] | None
    icc_profile: bytes | None = None
    frames: int = 1

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

    Animated inputs (GIF, APNG, animated WebP) give their first frame; ``frames`` says how many there were.
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
        frames = int(getattr(image, "n_frames", 1))
        image.seek(0)
        if min_side_px is not None and image.format == "JPEG":
            image.draft(image.mode, (min_side_px, min_side_px))
        image.load()
        upright = ImageOps.exif_transpose(image)
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise CorruptImage(f"the {image.format} image is damaged or truncated: {exc}") from exc
    rgb, alpha = _to_contract(upright)
    return DecodedImage(
        rgb=rgb,
        alpha=alpha,
        format=str(image.format).lower(),
        dpi=_read_dpi(image),
        icc_profile=image.info.get("icc_profile") or None,
        frames=frames,
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
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I"):
        values = np.asarray(image, dtype=np.float64)
        peak = 65535.0 if mode.startswith("I;16") or values.max(initial=0) > 255 else 255.0
        gray = np.clip(np.rint(values * (255.0 / peak)), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(gray[..., None], 3, axis=2)), None
    if mode == "F":
        values = np.asarray(image, dtype=np.float64)
        gray = np.clip(np.rint(values * (255.0 if values.max(initial=0) <= 1.0 else 1.0)), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(gray[..., None], 3, axis=2)), None
    has_alpha = mode in ("RGBA", "LA", "PA", "RGBa", "La") or (mode == "P" and "transparency" in image.info)
    if has_alpha:
        rgba = np.asarray(image.convert("RGBA"))
        return np.ascontiguousarray(rgba[..., :3]), np.ascontiguousarray(rgba[..., 3])
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))), None


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

    JPEG has no alpha channel, so alpha is dropped there; PNG and WebP keep it.
    """
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
