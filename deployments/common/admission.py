"""The one admission rule for pixels: every job's output and every model stage's input has a cap.

Each cap is checked before any work, from what is known then: the image header (a job decodes with its own cap, so
an oversized canvas is refused after its header only) and the params (the output size they imply). An image over a
cap is 413 ``image_too_many_pixels``, a parameter combination whose output would exceed one is 422
``invalid_parameter``; both name the limit. A model stage checks its own cap per item (``PixelCap.admit_image`` in
each engine's ``admit``), so an item that slipped past a job fails alone (``deployments.common.batching``).

The caps are constants: CPU and GPU configs admit the same requests (a GPU is faster, not bigger per item). Big
inputs are tiled (Real-ESRGAN) or brought to the model's own geometry (DCT-Net, MODNet, the detectors), never handed
whole to a network.

| cap | pixels | why |
|---|---|---|
| ID photo output | 4 MP | presets are under 1.6 MP; also the input of the steps after crop |
| cut-out (the size of its photo) | 16 MP | matte and crop steps: a 12 MP phone photo fits; made in bands of rows |
| photo for a whole ID photo | 24 MP | a 24 MP camera photo fits; its output is 4 MP at most (~500 MB to make) |
| restored photo output | 64 MP | ``upscale`` 4 takes photos up to 4 MP, 2 up to 16 MP |
| cartoon output (the input's size) | 50 MP | the decode cap; the network sees at most 720x2048 |
| colorized photo (the input's size) | 50 MP | the decode cap; the network sees its lightness at 512² (at most 1024²) |
| edited photo (the input's size) | 24 MP | the LOOK engine works the whole photo in float32 (12 B/px an array) |
| whole photo into a stage (faces, matting) | 50 MP | the stage shrinks it for its network |
| face crop into a restorer | 1024x1024 | crops are 256 or 512 |
| tile into the upscaler | 512x512 | the job cuts 400 px tiles with 10 px context |
| image into DCT-Net | 720x2048 | short side 720 as the official service; long side bounded too |
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from deployments.common.errors import ImageTooManyPixels

MEGAPIXEL = 1_000_000
MIN_PHOTO_SIDE_PX = 8  # the smallest photo side the whole-photo stages take (the detectors' anchors need it)


@dataclass(frozen=True)
class PixelCap:
    """At most ``max_pixels`` pixels for ``what`` (a phrase: "a restored photo")."""

    what: str
    max_pixels: int

    def problem(self, width_px: int, height_px: int) -> str | None:
        """Why ``width_px`` x ``height_px`` is refused, naming the cap; None when it fits (params validators raise
        the text as a 422)."""
        if width_px * height_px <= self.max_pixels:
            return None
        return (
            f"{self.what} of {width_px}x{height_px} = {width_px * height_px} pixels is over the cap of "
            f"{self.max_pixels} ({self.max_pixels / MEGAPIXEL:g} MP)"
        )

    def admit(self, width_px: int, height_px: int) -> None:
        """Raise 413 ``image_too_many_pixels`` naming the cap when the image exceeds it."""
        if width_px * height_px > self.max_pixels:
            raise self.refusal(width_px, height_px)

    def refusal(self, width_px: int, height_px: int) -> ImageTooManyPixels:
        """The 413 for an image over this cap."""
        return ImageTooManyPixels(
            str(self.problem(width_px, height_px)),
            details={"width": width_px, "height": height_px, "max_pixels": self.max_pixels, "what": self.what},
        )

    def admit_image(self, image: np.ndarray) -> None:
        """``admit`` for an array (HxW...), the check a model stage runs on each item."""
        self.admit(int(image.shape[1]), int(image.shape[0]))

    def scaled_down(self, factor: int, what: str) -> PixelCap:
        """The cap on an input that becomes ``factor`` times larger per side (a restore with ``upscale``)."""
        return PixelCap(what, self.max_pixels // (factor * factor))


# Job outputs.
IDPHOTO_OUTPUT = PixelCap("an ID photo", 4 * MEGAPIXEL)
CUT_OUT_OUTPUT = PixelCap("a cut-out (the size of its photo)", 16 * MEGAPIXEL)
IDPHOTO_INPUT = PixelCap("a photo for an ID photo", 24 * MEGAPIXEL)
RESTORE_OUTPUT = PixelCap("a restored photo", 64 * MEGAPIXEL)
CARTOON_OUTPUT = PixelCap("a cartoon (the size of its photo)", 50 * MEGAPIXEL)
COLORIZE_OUTPUT = PixelCap("a colorized photo (the size of its photo)", 50 * MEGAPIXEL)
EDIT_OUTPUT = PixelCap("an edited photo (the size of its photo)", 24 * MEGAPIXEL)

# Model stage inputs, per item.
PHOTO_STAGE_INPUT = PixelCap("a photo for face analysis or matting", 50 * MEGAPIXEL)
FACE_CROP_INPUT = PixelCap("a face crop for a restorer", 1024 * 1024)
UPSCALE_TILE_INPUT = PixelCap("a tile for the upscaler", 512 * 512)
DCTNET_SHORT_SIDE_PX = 720
DCTNET_LONG_SIDE_PX = 2048
DCTNET_INPUT = PixelCap("an image for DCT-Net", DCTNET_SHORT_SIDE_PX * DCTNET_LONG_SIDE_PX)


def restore_input_cap(upscale: int) -> PixelCap:
    """The largest photo a restore at ``upscale`` admits: its output must fit ``RESTORE_OUTPUT``."""
    return RESTORE_OUTPUT.scaled_down(
        upscale, f"a photo to restore at upscale {upscale} (the output is capped at {RESTORE_OUTPUT.max_pixels} pixels)"
    )
