"""Wire models: what the HTTP API and the bucket metadata files carry. Inside the service, frozen dataclasses."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from serve_app.registry import JobName


class ErrorDetail(BaseModel):
    code: str = Field(examples=["unsupported_image"])
    message: str
    details: dict[str, Any] | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail


class FaceOut(BaseModel):
    box: list[float] = Field(description="[x1, y1, x2, y2] in original-image pixels after EXIF orientation")
    score: float
    landmarks: list[list[float]] = Field(description="5 points: left eye, right eye, nose tip, mouth left, mouth right")
    roll_deg: float
    chin: list[float]


class FacesOut(BaseModel):
    width: int
    height: int
    faces: list[FaceOut]
    engine: str
    timings_ms: dict[str, float]


class WeightsOut(BaseModel):
    name: str
    sha256: str | None = None
    state: str | None = None
    label: str | None = Field(default=None, description="what the weights are, where the name alone would mislead")


class ResultMeta(BaseModel):
    """Everything a caller needs to trust a result: which job, which engine and weights, what was found, how long."""

    job: JobName
    params: dict[str, Any]
    engine: str = Field(
        description="the manifest's engine label of each model that ran, joined by '+': 'gfpgan+realesrgan', "
        "'codeformer', 'dctnet'...; a non-neural fallback is 'classic-restore' or 'classic-cartoon'"
    )
    weights: list[WeightsOut] = Field(default_factory=list)
    faces: int = 0
    width: int
    height: int
    media_type: str
    bytes: int
    timings_ms: dict[str, float] = Field(default_factory=dict)
    report: dict[str, Any] | None = None
    identity: dict[str, Any] | None = Field(
        None,
        description="the face that moved most: {face, similarity, same_person, judge, threshold} (each face's own "
        "beside its crops with return=json), or {unavailable: why} where the judge could not answer",
    )
    video: dict[str, Any] | None = Field(
        None, description="a video's facts: frames, fps, duration, faces per frame, tracks, resumed_from_chunk"
    )
    version: str


class FallbackOut(BaseModel):
    """A deployment serving a non-neural engine (or without a model it could use), and the command that fixes it."""

    deployment: str
    engine: str
    missing_models: list[str]
    fix: str


class HealthOut(BaseModel):
    """``status`` and ``version`` for anyone; the rest only where ``PORTRAIT_PUBLIC_HEALTH_DETAIL`` is set (it names
    replicas, local paths, bucket names and error texts)."""

    status: Literal["ok", "degraded", "failing"]
    version: str
    deployments: dict[str, dict[str, Any]] | None = None
    models: list[dict[str, Any]] | None = None
    fallbacks: list[FallbackOut] | None = None
    fix: str | None = Field(None, description="one command that fetches every missing model")
