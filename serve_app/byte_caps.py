"""The byte caps on what callers send, one per kind of media, and the answer an upload over its cap gets.

Each cap has one source, a process setting: ``max_image_bytes`` for a photo, ``max_video_bytes`` for a video (taken
by the asynchronous paths only). Every entry point reads under the cap of the kind it sniffs from the content's first
bytes (``looks_like_video``; anything else is a photo), so a refusal names what was sent, the cap in MiB and the
setting that raises it:

- 413 ``image_too_large`` (a photo), 413 ``video_too_large`` (a video); ``details.limit`` names the setting;
- 415 ``video_needs_job`` for a video where none is taken (the synchronous and OpenAI-compatible routes): its size
  does not matter there, the route does.

Entry points: request bodies (``serve_app.uploads``), ``POST /v1/jobs`` uploads and ``input`` keys
(``serve_app.jobs_api.submission``, ``serve_app.jobs.video.check_media``), bucket and job objects
(``serve_app.jobs.video.read_object``), ``image_url`` data URLs and remote files (``serve_app.chat_messages``,
``serve_app.remote_images``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from deployments.common.errors import ImageTooLarge, InputError, VideoNeedsJob, VideoTooLarge
from deployments.video.probe import looks_like_video
from storage.errors import ObjectTooLarge

SNIFF_BYTES = 64  # enough of the content's start to tell a video container from an image
PHOTO_SETTING = "max_image_bytes"
VIDEO_SETTING = "max_video_bytes"
ENV_PREFIX = "PORTRAIT_"  # the settings' (``deployments.common.settings.ModelSettings``)


@dataclass(frozen=True)
class ByteCap:
    """The cap of one kind; ``taken`` False: a video where videos are not taken (refused whatever its size, once it
    passes the photo cap it is read under)."""

    kind: Literal["photo", "video"]
    max_bytes: int
    setting: str
    taken: bool = True

    def refusal(self, found: str) -> InputError:
        """``found``: what was measured (``the request declares 123 bytes``)."""
        if not self.taken:
            return video_needs_job()
        variable = ENV_PREFIX + self.setting.upper()
        error = ImageTooLarge if self.kind == "photo" else VideoTooLarge
        return error(
            f"{found}: over the limit for a {self.kind}, {megabytes(self.max_bytes)} ({variable} raises it)",
            details={"limit": self.setting, "max_bytes": self.max_bytes, "setting": variable},
        )


@dataclass(frozen=True)
class MediaCaps:
    """The caps of one entry point; ``video`` None where videos are not taken."""

    photo: ByteCap
    video: ByteCap | None

    @property
    def most_bytes(self) -> int:
        """The largest upload any kind may be: what to read under before the kind is known."""
        return max(self.photo.max_bytes, self.video.max_bytes if self.video else 0)

    def cap_for(self, head: bytes) -> ByteCap:
        """The cap of the content whose first bytes are ``head``."""
        if not looks_like_video(head):
            return self.photo
        return self.video or ByteCap("video", self.photo.max_bytes, self.photo.setting, taken=False)

    def check(self, head: bytes, size_bytes: int, what: str) -> None:
        """Refuse ``what`` (content of ``size_bytes`` beginning with ``head``) when it is over its kind's cap."""
        cap = self.cap_for(head)
        if size_bytes > cap.max_bytes:
            raise cap.refusal(f"{what} has {size_bytes} bytes")

    def object_refusal(self, exc: ObjectTooLarge) -> InputError:
        """A store's refusal of an object over ``most_bytes``, said for its kind (the store read its first bytes)."""
        return self.cap_for(exc.head).refusal(f"the object {exc.key!r} has {exc.size_bytes} bytes")


def media_caps(photo_bytes: int, video_bytes: int | None) -> MediaCaps:
    """``video_bytes`` None: the entry point takes no video."""
    video = None if video_bytes is None else ByteCap("video", video_bytes, VIDEO_SETTING)
    return MediaCaps(ByteCap("photo", photo_bytes, PHOTO_SETTING), video)


def video_needs_job(task: str | None = None) -> VideoNeedsJob:
    """A video sent where only photos are taken: it goes through the jobs API."""
    with_task = f" with task={task}" if task else ""
    return VideoNeedsJob(
        f"a video takes time: submit it as an asynchronous job, POST /v1/jobs{with_task}, then poll "
        "GET /v1/jobs/{id} or pass callback_url",
        details={"jobs_url": "/v1/jobs", **({"task": task} if task else {})},
    )


def megabytes(size_bytes: int) -> str:
    """``20 MiB``, ``1.5 MiB``; a cap under one MiB in bytes."""
    if size_bytes < 2**20:
        return f"{size_bytes} bytes"
    return f"{size_bytes / 2**20:.4g} MiB"
