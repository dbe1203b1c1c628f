"""Options of the ``identity`` job (``POST /v1/identity``): the reference photo and which face of each photo."""

from __future__ import annotations

from pydantic import Field

from deployments.common.params import JobParams

# The reference travels as base64 in a text field or JSON: at most this many characters (~12 MB of image).
MAX_REFERENCE_B64_CHARS = 16 * 1024 * 1024


class IdentityParams(JobParams):
    reference_b64: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_REFERENCE_B64_CHARS,
        description="the photo to compare with, base64 (a data: URL too), as a text field or in the JSON body; "
        "required (optional here only so a bucket route's defaults may leave it to each object)",
    )
    face: int | None = Field(None, ge=0, le=63, description="which face of the image (0 = largest; default largest)")
    reference_face: int | None = Field(
        None, ge=0, le=63, description="which face of the reference (0 = largest; default largest)"
    )
