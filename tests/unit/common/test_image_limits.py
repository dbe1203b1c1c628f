"""What a hostile or unusual file may cost the decoder, and the formats' own limits on output: each a clear 4xx, never
a 500 or a walk through the whole file."""

from __future__ import annotations

import io
import struct
import tracemalloc

import numpy as np
import pytest
from PIL import GifImagePlugin, Image

from deployments.common.errors import InvalidParameter
from deployments.common.image import MAX_SIDE_PX, decode_image, encode_image


def _save(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def _gif_of(frames: int) -> bytes:
    """A 1x1 GIF whose one image block is repeated ``frames`` times (about 12 bytes a frame)."""
    one = _save(Image.new("P", (1, 1), 0), "GIF")
    start = one.index(b"\x2c")  # the image descriptor
    return one[:start] + one[start:-1] * frames + b"\x3b"


def test_a_gif_of_many_frames_is_decoded_without_walking_them(monkeypatch):
    seeks = []
    original = GifImagePlugin.GifImageFile._seek

    def counted(self, frame, *args, **kwargs):
        seeks.append(frame)
        return original(self, frame, *args, **kwargs)

    monkeypatch.setattr(GifImagePlugin.GifImageFile, "_seek", counted)
    decoded = decode_image(_gif_of(20_000))
    assert (decoded.width, decoded.height, decoded.animated) == (1, 1, True)
    assert max(seeks) <= 1  # the first frame, and a look at the second


def test_a_tiff_whose_second_frame_lacks_its_size_gives_its_first_frame():
    """Pillow raised TypeError counting such a file's frames (a 500); only the first frame is ever used."""
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = bytearray(_save(frames[0], "TIFF", save_all=True, append_images=frames[1:]))
    first = struct.unpack_from("<I", data, 4)[0]
    second = struct.unpack_from("<I", data, first + 2 + 12 * struct.unpack_from("<H", data, first)[0])[0]
    for entry in range(struct.unpack_from("<H", data, second)[0]):
        if struct.unpack_from("<H", data, second + 2 + 12 * entry)[0] == 256:  # ImageWidth
            struct.pack_into("<H", data, second + 2 + 12 * entry, 65000)  # now a private tag: no width
    decoded = decode_image(bytes(data))
    assert (decoded.width, decoded.animated, tuple(decoded.rgb[4, 4])) == (8, True, (255, 0, 0))


def test_a_16_bit_image_is_scaled_without_a_float64_copy_of_it():
    side = 1000
    ramp = np.linspace(0, 65535, side * side).astype(np.uint16).reshape(side, side)
    data = _save(Image.fromarray(ramp), "PNG")
    tracemalloc.start()
    try:
        decoded = decode_image(data)
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = np.rint(ramp / 257.0).astype(np.uint8)
    assert np.array_equal(decoded.rgb[..., 1], expected)
    # 9.3 bytes a pixel here: the output is 3, the 16-bit input 2 (twice: Pillow's bytes, then the array), the rest
    # bands of rows. A float64 copy of the whole image and its temporaries peaked at 24.
    assert peak_bytes < 12 * side * side


@pytest.mark.parametrize("fmt", sorted(MAX_SIDE_PX))
def test_a_result_longer_than_its_format_holds_is_a_422_naming_the_limit(fmt):
    limit = MAX_SIDE_PX[fmt]
    with pytest.raises(InvalidParameter) as refused:
        encode_image(np.zeros((2, limit + 1, 3), np.uint8), fmt)
    assert (refused.value.http_status, refused.value.details) == (
        422,
        {"field": "format", "max_side_px": limit, "width": limit + 1, "height": 2},
    )
    assert len(encode_image(np.zeros((2, limit, 3), np.uint8), fmt)) > 0
