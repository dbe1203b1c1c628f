"""Decoding and encoding: every bad input in the corpus gets a typed error, every good one the image contract."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from deployments.common.errors import (
    CorruptImage,
    ImageTooLarge,
    ImageTooManyPixels,
    InputError,
    InvalidParameter,
    UnsupportedImage,
)
from deployments.common.image import decode_image, encode_image, require_image, resize_alpha


def _save(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


@pytest.fixture()
def small_rgb(astronaut_rgb) -> np.ndarray:
    return np.ascontiguousarray(astronaut_rgb[::8, ::8])  # 64x64 real photo


def test_zero_bytes_is_refused_as_empty():
    with pytest.raises(UnsupportedImage, match="empty"):
        decode_image(b"")


def test_text_file_named_jpg_is_not_an_image():
    with pytest.raises(UnsupportedImage) as info:
        decode_image(b"hello, I am a text file pretending to be photo.jpg\n" * 4)
    assert info.value.code == "unsupported_image" and info.value.http_status == 415


def test_truncated_jpeg_is_corrupt(small_rgb):
    data = _save(Image.fromarray(small_rgb), "JPEG", quality=90)
    with pytest.raises(CorruptImage) as info:
        decode_image(data[: len(data) // 2])
    assert info.value.http_status == 400


def test_png_bomb_header_is_refused_before_decoding():
    header = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0))
    bomb = header + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 1000)) + _png_chunk(b"IEND", b"")
    with pytest.raises(ImageTooManyPixels) as info:
        decode_image(bomb)
    assert info.value.http_status == 413 and "pixels" in info.value.message


def test_byte_limit_is_enforced(small_rgb):
    data = _save(Image.fromarray(small_rgb), "PNG")
    with pytest.raises(ImageTooLarge) as info:
        decode_image(data, max_bytes=len(data) - 1)
    assert info.value.http_status == 413


def test_pixel_limit_is_configurable(small_rgb):
    with pytest.raises(ImageTooManyPixels):
        decode_image(_save(Image.fromarray(small_rgb), "PNG"), max_pixels=64 * 64 - 1)


def test_sixteen_bit_grayscale_png_is_scaled_to_eight_bits():
    ramp = (np.arange(64 * 64, dtype=np.uint32).reshape(64, 64) * 16).astype(np.uint16)
    decoded = decode_image(_save(Image.fromarray(ramp), "PNG"))
    assert decoded.rgb.dtype == np.uint8 and decoded.rgb.shape == (64, 64, 3)
    expected = np.rint(ramp.astype(np.float64) * 255 / 65535).astype(np.uint8)
    assert np.array_equal(decoded.rgb[..., 0], expected)


def test_cmyk_jpeg_becomes_rgb(small_rgb):
    cmyk = Image.fromarray(small_rgb).convert("CMYK")
    decoded = decode_image(_save(cmyk, "JPEG", quality=95))
    assert decoded.rgb.shape == (64, 64, 3) and decoded.format == "jpeg"
    assert np.abs(decoded.rgb.astype(int) - small_rgb.astype(int)).mean() < 12


def test_rgba_png_keeps_alpha_separately(small_rgb):
    alpha = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (64, 1))
    decoded = decode_image(_save(Image.fromarray(np.dstack([small_rgb, alpha]), "RGBA"), "PNG"))
    assert np.array_equal(decoded.rgb, small_rgb)
    assert np.array_equal(decoded.alpha, alpha)


def test_exif_rotated_jpeg_is_made_upright(small_rgb):
    tall = np.ascontiguousarray(small_rgb[:, :40])  # 64 high, 40 wide
    exif = Image.Exif()
    exif[0x0112] = 6  # stored rotated: viewers turn it 90 degrees clockwise
    data = _save(Image.fromarray(tall), "JPEG", quality=95, exif=exif.tobytes())
    decoded = decode_image(data)
    assert decoded.rgb.shape == (40, 64, 3)
    expected = np.rot90(tall, k=-1)
    assert np.abs(decoded.rgb.astype(int) - expected.astype(int)).mean() < 6


def test_webp_named_jpg_decodes_by_content(small_rgb):
    decoded = decode_image(_save(Image.fromarray(small_rgb), "WEBP", lossless=True))
    assert decoded.format == "webp"
    assert np.array_equal(decoded.rgb, small_rgb)


def test_grayscale_becomes_three_equal_channels(small_rgb):
    gray = Image.fromarray(small_rgb).convert("L")
    decoded = decode_image(_save(gray, "PNG"))
    assert np.array_equal(decoded.rgb[..., 0], np.asarray(gray))
    assert np.array_equal(decoded.rgb[..., 0], decoded.rgb[..., 2])


def test_animated_gif_gives_its_first_frame():
    frames = [Image.new("RGB", (32, 32), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:])
    decoded = decode_image(buffer.getvalue())
    assert decoded.animated
    assert tuple(decoded.rgb[16, 16]) == (255, 0, 0)


@pytest.mark.parametrize("fmt", ["BMP", "TIFF"])
def test_lossless_formats_round_trip(small_rgb, fmt):
    assert np.array_equal(decode_image(_save(Image.fromarray(small_rgb), fmt)).rgb, small_rgb)


def test_unsupported_but_recognised_format_is_refused(small_rgb):
    with pytest.raises(UnsupportedImage, match="not supported"):
        decode_image(_save(Image.fromarray(small_rgb), "PPM"))


@pytest.mark.parametrize("cut", [8, 16, 40, 200])
def test_any_prefix_of_a_png_gives_a_typed_error(small_rgb, cut):
    data = _save(Image.fromarray(small_rgb), "PNG")
    with pytest.raises(InputError):
        decode_image(data[:cut])


def test_png_output_carries_dpi_alpha_and_software(small_rgb):
    alpha = np.full((64, 64), 128, np.uint8)
    data = encode_image(small_rgb, "png", alpha=alpha, dpi=(300, 300))
    image = Image.open(io.BytesIO(data))
    assert image.mode == "RGBA"
    assert tuple(round(v) for v in image.info["dpi"]) == (300, 300)
    assert image.getexif()[0x0131] == "portrait-serve"
    assert np.array_equal(np.asarray(image)[..., 3], alpha)


def test_jpeg_output_writes_jfif_density_and_exif_resolution(small_rgb):
    image = Image.open(io.BytesIO(encode_image(small_rgb, "jpeg", dpi=(300, 300), quality=90)))
    assert image.info["jfif_density"] == (300, 300) and image.info["jfif_unit"] == 1
    exif = image.getexif()
    assert (float(exif[0x011A]), float(exif[0x011B]), exif[0x0128]) == (300.0, 300.0, 2)


def test_decode_reads_back_dpi(small_rgb):
    assert decode_image(encode_image(small_rgb, "png", dpi=(300, 300))).dpi == pytest.approx((300, 300), abs=0.1)


def test_resize_alpha_follows_the_output_size():
    alpha = np.zeros((10, 20), np.uint8)
    assert resize_alpha(alpha, 40, 20).shape == (20, 40)
    assert resize_alpha(None, 40, 20) is None


def test_jpeg_of_pure_noise_at_quality_100_encodes():
    noise = np.random.default_rng(0).integers(0, 256, (300, 300, 3), dtype=np.uint8)
    data = encode_image(noise, "jpeg", quality=100, subsampling="4:4:4")
    assert Image.open(io.BytesIO(data)).size == (300, 300)


@pytest.mark.parametrize(
    "image, problem",
    [
        (np.zeros((8, 8), np.uint8), "HxWx3"),
        (np.zeros((8, 8, 3), np.float32), "uint8"),
        (np.zeros((2, 8, 3), np.uint8), "smaller than 4 px"),
        ("not an array", "HxWx3"),
    ],
)
def test_require_image_names_what_is_wrong(image, problem):
    with pytest.raises(InvalidParameter, match=problem):
        require_image(image, what="test input", min_side_px=4)


def test_min_side_lets_a_big_jpeg_decode_at_a_reduced_scale_only_as_far_as_allowed():
    rgb = np.zeros((1600, 1200, 3), np.uint8)
    rgb[:800] = (200, 40, 40)
    data = encode_image(rgb, "jpeg")
    assert decode_image(data, min_side_px=500).rgb.shape == (800, 600, 3)  # 1/2: 1/4 would make a side < 500
    assert decode_image(data, min_side_px=100).rgb.shape == (200, 150, 3)  # 1/8 is the decoder's limit
    assert decode_image(data, min_side_px=2000).rgb.shape == (1600, 1200, 3)
    half = decode_image(data, min_side_px=500).rgb.astype(int)
    assert np.abs(half[100, 300] - (200, 40, 40)).max() <= 4 and half[700, 300].max() <= 4
    png = encode_image(rgb, "png")
    assert decode_image(png, min_side_px=100).rgb.shape == (1600, 1200, 3)  # only JPEG scales in the decoder
