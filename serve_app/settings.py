"""Process settings of the edge (environment, prefix ``PORTRAIT_``); per-deployment tunables live in the Serve YAML.

``Settings`` extends the model store settings the deployments read (``deployments.common.settings``), so one object
describes the whole process and each field is declared once.
"""

from __future__ import annotations

import urllib.parse
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from deployments.common.image import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from deployments.common.settings import REPO_ROOT, ModelSettings
from serve_app.outbound import allow_list


class Settings(ModelSettings):
    """Input limits, the events token, bucket roots, the request timeout and what health says, beside the model
    store."""

    id_specs: Path = REPO_ROOT / "configs" / "id_specs.yaml"
    max_image_bytes: int = Field(DEFAULT_MAX_BYTES, gt=0)
    max_image_pixels: int = Field(DEFAULT_MAX_PIXELS, gt=0)
    request_timeout_s: float = Field(
        120.0, gt=0, description="a job route answers 504 `timeout` after this; keep Serve's proxy timeout above it"
    )
    sync_render_mp_steps: float = Field(
        8.0,
        ge=0,
        description="the most rendering (megapixels × steps, every candidate and redraw summed; a 1024² render of 30 "
        "steps is 31.5) a synchronous `portrait` or neural `edit` may plan; more is taken as an asynchronous job (202 "
        "with its status URL) where the jobs API runs, else refused (422 `needs_job`). CPU: ~8; one GPU: ~2000",
    )
    body_timeout_s: float = Field(
        60.0, gt=0, description="a request body not all arrived after this is refused (408): no slot held by a drip"
    )
    health_timeout_s: float = Field(
        2.0, gt=0, le=30, description="/healthz answers within this, whatever the deployments do"
    )
    health_cache_s: float = Field(
        1.0, ge=0, le=60, description="/healthz, /v1/models and /v1/cartoon/styles share one fan-out per this long"
    )
    public_health_detail: bool = Field(
        False,
        description="/healthz shows every deployment's report (replicas, paths, bucket names, errors) to anyone; "
        "off: only status and version",
    )
    max_video_bytes: int = Field(512 * 1024**2, gt=0, description="largest video a job or bucket route accepts")
    max_upload_bytes_in_flight: int = Field(
        2 * 1024**3,
        gt=0,
        description="request-body bytes one ingress process holds at once (received, in memory or in temporary "
        "files) before it answers 503 `overloaded`; a body alone over it is taken only when no other is in flight",
    )
    upload_memory_bytes: int = Field(
        8 * 1024**2,
        ge=0,
        description="a POST /v1/jobs upload up to this stays in memory; a larger one goes to a temporary file",
    )
    upload_tmp_dir: Path | None = Field(
        None, description="folder of the uploads' temporary files (default: the system's temporary folder)"
    )
    video_max_duration_s: float = Field(600.0, gt=0, description="longest video, from its container's header")
    video_max_frames: int = Field(15_000, gt=0, description="most frames of one video")
    video_max_frame_pixels: int = Field(1920 * 1088, gt=0, description="largest frame (before any upscale)")
    video_max_output_bytes: int = Field(
        1024**3, gt=0, le=5 * 1024**3, description="largest encoded result of one video (S3 takes 5 GiB in one PUT)"
    )
    video_chunk_frames: int = Field(16, ge=1, le=256, description="frames decoded, processed and stored together")
    video_frames_in_flight: int = Field(8, ge=1, le=64, description="frames of one video awaited at once")
    video_detect_every: int = Field(1, ge=1, le=30, description="detect faces on every k-th frame; track between")
    compliance_idphoto: bool = Field(
        True,
        description="the compliance gate checks ID photos (the idphoto job, its matte and crop steps, Hivision's "
        "/idphoto); generative jobs are always checked",
    )
    compliance_llm: bool = Field(
        True,
        description="the compliance gate asks the app's language model (args.llm or args.instructions.llm) for its "
        "verdict; off: the detector's rules only (an endpoint whose model reads no images)",
    )
    compliance_llm_timeout_s: float = Field(
        10.0, gt=0, le=120, description="past this the compliance gate's rules answer without the language model"
    )
    edit_endpoint_url: str | None = Field(
        None,
        description="an OpenAI-compatible images API's /v1 root (vLLM-Omni: http://gpu-1:8092/v1): the edit job's "
        "model=external posts the photo to its /images/edits; unset, model=external is a 503",
    )
    edit_endpoint_model: str | None = Field(
        None, description="the model the endpoint serves, sent as `model` (Qwen/Qwen-Image-Edit-2511)"
    )
    edit_endpoint_api_key_file: Path | None = Field(
        None,
        description="a file holding the endpoint's API key (a mounted secret), instead of "
        "PORTRAIT_EDIT_ENDPOINT_API_KEY; either is read at each call, sent as a bearer token, never logged",
    )
    edit_endpoint_timeout_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="one deadline for a whole call (resolving, connecting, sending, the answer): past it 504 "
        "editor_timeout; keep it under PORTRAIT_REQUEST_TIMEOUT_S",
    )
    edit_endpoint_max_response_bytes: int = Field(
        32 * 1024**2, gt=0, description="a longer answer is refused as it arrives (502 editor_failed)"
    )
    edit_endpoint_max_side_px: int = Field(
        1024,
        ge=64,
        le=4096,
        description="the photo is scaled down to this longest side before it is sent (editors work near 1 MP); the "
        "answer is scaled back to the photo's size",
    )
    edit_endpoint_size: Literal["photo", "auto"] | None = Field(
        None,
        description="the `size` sent: photo (the sent photo's WxH; vLLM-Omni takes any), auto (OpenAI's); unset: "
        "none, the endpoint's own choice",
    )
    edit_endpoint_hosts: tuple[str, ...] = Field(
        (),
        description="host names or CIDRs the endpoint may be at besides public addresses, on any port (a GPU box on "
        "10.0.0.0/8); otherwise a public address on port 80 or 443, as for callbacks",
    )
    events_token: SecretStr | None = Field(
        None,
        description="bearer token POST /v1/events/s3 requires; unset, the ingress starts the webhook on loopback only",
    )
    buckets_root: Path | None = Field(
        None,
        description="absolute base of relative local-folder bucket routes; required on a multi-node cluster "
        "(default on one node: the working directory)",
    )

    @field_validator("edit_endpoint_url")
    @classmethod
    def _http_root(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"PORTRAIT_EDIT_ENDPOINT_URL must be an http(s) URL with a host, got {url!r}")
        return url.rstrip("/")

    @field_validator("edit_endpoint_hosts")
    @classmethod
    def _hosts_or_networks(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        return allow_list(hosts)

    @model_validator(mode="after")
    def _endpoint_and_model_together(self) -> Settings:
        if (self.edit_endpoint_url is None) != (self.edit_endpoint_model is None):
            raise ValueError(
                "PORTRAIT_EDIT_ENDPOINT_URL and PORTRAIT_EDIT_ENDPOINT_MODEL go together: set both, or neither"
            )
        return self

    @field_validator("events_token")
    @classmethod
    def _token_not_blank(cls, token: SecretStr | None) -> SecretStr | None:
        if token is not None and not token.get_secret_value().strip():
            raise ValueError("PORTRAIT_EVENTS_TOKEN is set but blank: give it a token, or unset it (loopback only)")
        return token


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
