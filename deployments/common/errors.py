"""One error tree for the whole service.

Each error has a stable ``code`` (part of the API) and the HTTP status the ingress answers with; the bucket runner
writes the same ``code``/``message`` into its ``_errors/`` records. Expected outcomes (a photo without a face) are
values in the job outcomes, not exceptions; they become errors only where a request demands them (``strict``).

    PortraitError
    ├── InputError (4xx: the caller sent something we cannot use)
    │   ├── ImageTooLarge           413 image_too_large
    │   ├── ImageTooManyPixels      413 image_too_many_pixels
    │   ├── UnsupportedImage        415 unsupported_image
    │   ├── CorruptImage            400 corrupt_image
    │   ├── InvalidParameter        422 invalid_parameter
    │   │   └── InstructionRefused  422 instruction_refused (an edit the policy refuses: ``deployments/edit/words.py``)
    │   ├── UnsupportedVideo        415 unsupported_video  (not a container we read; no video stream)
    │   ├── VideoNeedsJob           415 video_needs_job    (a video sent to a synchronous route: use /v1/jobs)
    │   ├── RenderNeedsJob          422 render_needs_job   (more rendering than a synchronous route may plan: /v1/jobs)
    │   ├── CorruptVideo            400 corrupt_video
    │   ├── VideoTooLarge           413 video_too_large    (details.limit names the bound)
    │   ├── NoFaceFound             422 no_face
    │   ├── NotCompliant            422 not_compliant
    │   ├── InputRefused            422 input_refused    (the compliance gate refused the photo: ``reason_codes``)
    │   ├── IdentityChanged         422 identity_changed (a face moved below ``min_identity``)
    │   └── EditorRefused           422 editor_refused   (the external edit endpoint refused the prompt)
    └── ServiceError (5xx: our side)
        ├── InternalError           500 internal_error   (our own consistency checks: a bug, never the caller's fault)
        ├── ModelUnavailable        503 model_unavailable
        ├── Overloaded              503 overloaded
        ├── StageUnavailable        503 unavailable      (a model stage's replica was lost: node or process died)
        ├── RequestTimeout          504 timeout          (no answer within the request timeout)
        ├── StorageError            502 storage_error
        └── EditorFailed            502 editor_failed    (the external edit endpoint: unreachable, an error, bad JSON)
            └── EditorTimeout       504 editor_timeout   (no answer within its ``timeout_s``)
"""

from __future__ import annotations

from typing import Any


class PortraitError(Exception):
    """Base of every error the service reports to a caller."""

    code: str = "internal_error"
    http_status: int = 500

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InputError(PortraitError):
    code = "invalid_input"
    http_status = 400


class ImageTooLarge(InputError):
    code = "image_too_large"
    http_status = 413


class ImageTooManyPixels(InputError):
    code = "image_too_many_pixels"
    http_status = 413


class UnsupportedImage(InputError):
    code = "unsupported_image"
    http_status = 415


class CorruptImage(InputError):
    code = "corrupt_image"
    http_status = 400


class InvalidParameter(InputError):
    code = "invalid_parameter"
    http_status = 422


class InstructionRefused(InvalidParameter):
    """A request for an edit the service refuses (a person's ethnicity changed, a child made older or sexualised):
    ``details`` holds ``reason_code`` and the reason in English and Chinese (``reason_en``, ``reason_zh``)."""

    code = "instruction_refused"


class UnsupportedVideo(InputError):
    code = "unsupported_video"
    http_status = 415


class VideoNeedsJob(InputError):
    code = "video_needs_job"
    http_status = 415


class RenderNeedsJob(InputError):
    code = "render_needs_job"
    http_status = 422


class CorruptVideo(InputError):
    code = "corrupt_video"
    http_status = 400


class VideoTooLarge(InputError):
    code = "video_too_large"
    http_status = 413


class NoFaceFound(InputError):
    code = "no_face"
    http_status = 422


class NotCompliant(InputError):
    code = "not_compliant"
    http_status = 422


class InputRefused(InputError):
    """The compliance gate will not run this photo (nudity, not a real photograph, a covered face...).

    ``reason_codes`` are in the ID-photo report's vocabulary (``deployments/idphoto/texts.py``) and are also
    ``details["reason_codes"]``, beside the reasons and advice in English and Chinese."""

    code = "input_refused"
    http_status = 422

    def __init__(self, message: str, *, reason_codes: tuple[str, ...], details: dict[str, Any] | None = None) -> None:
        super().__init__(message, details={**(details or {}), "reason_codes": list(reason_codes)})
        self.reason_codes = tuple(reason_codes)


class IdentityChanged(InputError):
    """A result whose face moved further than the caller allows (``min_identity``): ``details`` names the face, its
    similarity and the judge."""

    code = "identity_changed"
    http_status = 422


class EditorRefused(InputError):
    """The external edit endpoint refused the prompt (its own content policy): the caller's words, not our fault."""

    code = "editor_refused"
    http_status = 422


class ServiceError(PortraitError):
    code = "service_error"
    http_status = 500


class InternalError(ServiceError):
    """A consistency check in our own code failed: reported as 500 with the request id, retried by the bucket runner."""

    code = "internal_error"
    http_status = 500


class ModelUnavailable(ServiceError):
    code = "model_unavailable"
    http_status = 503


class Overloaded(ServiceError):
    code = "overloaded"
    http_status = 503


class StageUnavailable(ServiceError):
    """A replica died under the request (its node or process was lost); Serve replaces it, so retrying helps."""

    code = "unavailable"
    http_status = 503


class RequestTimeout(ServiceError):
    """The job did not finish within the request timeout (e.g. a model scaling up from zero replicas)."""

    code = "timeout"
    http_status = 504


class StorageError(ServiceError):
    code = "storage_error"
    http_status = 502


class EditorFailed(ServiceError):
    """The external edit endpoint gave no usable image: unreachable, refused by the outbound rules, an error status,
    an answer that is not its JSON, holds no image or is over its byte cap. An operator's service, not ours: the
    bucket runner records it after its retries instead of waiting for the endpoint (``runner.outcomes.classify``)."""

    code = "editor_failed"
    http_status = 502


class EditorTimeout(EditorFailed):
    """The external edit endpoint did not answer within its ``timeout_s`` (the whole exchange)."""

    code = "editor_timeout"
    http_status = 504
