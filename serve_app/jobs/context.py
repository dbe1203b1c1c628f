"""What every job needs besides its image and options: input limits, standards, styles, and a phase timer."""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from deployments.cartoon.styles import cartoon_styles
from deployments.common.admission import PixelCap
from deployments.common.errors import ImageTooManyPixels, InvalidParameter
from deployments.common.image import DecodedImage, decode_image
from deployments.common.timings import Timings as Timings  # the jobs time their phases with it
from deployments.common.weights import ModelSpec, load_manifest
from deployments.idphoto.specs import IdSpec, load_specs
from deployments.video.pipeline import VideoOptions
from deployments.video.probe import VideoLimits
from deployments.video.tracking import TrackingOptions
from serve_app.byte_caps import MediaCaps, media_caps
from serve_app.edit_endpoint import EditEndpoint
from serve_app.jobs.deadline import run_in_worker
from serve_app.settings import Settings


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_pixels: int


@dataclass(frozen=True)
class CompliancePolicy:
    """Which jobs the compliance gate checks (``serve_app/jobs/compliance.py``; generative ones always), and whether
    and how long it asks the app's language model."""

    idphoto: bool = True
    llm: bool = True
    llm_timeout_s: float = 10.0


@dataclass(frozen=True)
class JobContext:
    """Input limits, the model manifest, the ID-photo standards and the cartoon styles: the same for every job of a
    process (read from their files once); what the compliance gate checks; the edit job's external endpoint, if any."""

    limits: Limits
    manifest: Mapping[str, ModelSpec]
    id_specs: Mapping[str, IdSpec]
    cartoon_styles: tuple[str, ...]
    video: VideoSettings
    compliance: CompliancePolicy = CompliancePolicy()
    edit_endpoint: EditEndpoint | None = None

    def media_caps(self) -> MediaCaps:
        """The byte caps of the asynchronous paths, which take photos and videos."""
        return media_caps(self.limits.max_bytes, self.video.max_bytes)


@dataclass(frozen=True)
class VideoSettings:
    """A video job's bounds (checked from the container's header) and how its frames flow."""

    max_bytes: int
    limits: VideoLimits
    options: VideoOptions


def job_context(settings: Settings) -> JobContext:
    return JobContext(
        limits=Limits(max_bytes=settings.max_image_bytes, max_pixels=settings.max_image_pixels),
        manifest=_manifest(Path(settings.models_manifest)),
        id_specs=_id_specs(Path(settings.id_specs)),
        cartoon_styles=_cartoon_styles(Path(settings.models_manifest)),
        video=VideoSettings(
            max_bytes=settings.max_video_bytes,
            limits=VideoLimits(
                max_duration_s=settings.video_max_duration_s,
                max_frames=settings.video_max_frames,
                max_frame_pixels=settings.video_max_frame_pixels,
                max_output_bytes=settings.video_max_output_bytes,
            ),
            options=VideoOptions(
                chunk_frames=settings.video_chunk_frames,
                frames_in_flight=settings.video_frames_in_flight,
                tracking=TrackingOptions(detect_every=settings.video_detect_every),
            ),
        ),
        compliance=CompliancePolicy(
            idphoto=settings.compliance_idphoto,
            llm=settings.compliance_llm,
            llm_timeout_s=settings.compliance_llm_timeout_s,
        ),
        edit_endpoint=EditEndpoint.from_settings(settings),
    )


@lru_cache(maxsize=4)
def _id_specs(path: Path) -> dict[str, IdSpec]:
    return load_specs(path)


@lru_cache(maxsize=4)
def _manifest(path: Path) -> dict[str, ModelSpec]:
    return load_manifest(path)


@lru_cache(maxsize=4)
def _cartoon_styles(manifest_path: Path) -> tuple[str, ...]:
    return tuple(cartoon_styles(_manifest(manifest_path)))


async def decode_upload(data: bytes, limits: Limits, cap: PixelCap, *, min_side_px: int | None = None) -> DecodedImage:
    """Decode in a worker thread, so the ingress event loop keeps answering; an image over the decode limit or the
    job's own ``cap`` (``deployments.common.admission``) is refused from its header, the 413 naming the cap it broke
    (``min_side_px``: see ``decode_image``)."""
    try:
        return await run_in_worker(
            functools.partial(
                decode_image,
                data,
                max_bytes=limits.max_bytes,
                max_pixels=min(limits.max_pixels, cap.max_pixels),
                min_side_px=min_side_px,
            )
        )
    except ImageTooManyPixels as exc:
        width, height = exc.details.get("width"), exc.details.get("height")
        if width is None or height is None or cap.max_pixels >= limits.max_pixels:
            raise  # the decode limit is the one it broke
        raise cap.refusal(width, height) from exc


async def decode_base64(text: str, field: str) -> bytes:
    """An image sent as base64 text (a ``data:`` URL too), decoded in a worker thread; 422 naming ``field``."""

    def decode() -> bytes:
        encoded = text.partition(",")[2] if text.startswith("data:") else text
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidParameter(f"{field!r} is not valid base64: {exc}") from exc

    return await run_in_worker(decode)
