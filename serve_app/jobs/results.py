"""What every job returns: the encoded image, its metadata, and optional JSON attachments."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from deployments.common.engine import EngineInfo
from deployments.common.image import MEDIA_TYPES, DecodedImage, encode_image, resize_alpha
from deployments.common.params import JobParams
from serve_app import __version__
from serve_app.jobs.context import Timings
from serve_app.jobs.deadline import run_in_worker
from serve_app.registry import job_of
from serve_app.schemas import ResultMeta, WeightsOut

JSON_MEDIA_TYPE = "application/json"  # a job whose result is an answer, not an image (``identity``)

# Images a result may carry beside its own, in its media type: an ID photo's print sheet and HD copy. Each travels as
# ``<name>_b64`` + ``<name>_media_type`` in ``return=json`` and as ``<name>_key`` in a bucket record.
COMPANIONS = ("sheet", "hd")


@dataclass(frozen=True)
class JobResult:
    """``body``: the encoded result, or the file holding it (a video's, stored from disk by ``put_file``: never read
    into memory; only the asynchronous paths, which store results, ever see one)."""

    body: bytes | Path
    media_type: str
    meta: ResultMeta
    attachments: dict[str, Any] = field(default_factory=dict)
    sheet: bytes | None = None  # an ID photo's print sheet
    hd: bytes | None = None  # an ID photo's HD copy

    @property
    def size_bytes(self) -> int:
        return self.body.stat().st_size if isinstance(self.body, Path) else len(self.body)

    def companions(self) -> dict[str, bytes]:
        """The companion images this result has, by name (see ``COMPANIONS``)."""
        return {name: data for name in COMPANIONS if (data := getattr(self, name)) is not None}

    def headers(self) -> dict[str, str]:
        return result_headers(self.meta)

    @classmethod
    def from_json(cls, answer: dict[str, Any]) -> JobResult:
        """The inverse of ``to_json``: a job answered over HTTP with ``return=json`` (the backfill CLI reads it)."""
        fixed = {"image_b64", "media_type", "meta"} | {f"{n}_{e}" for n in COMPANIONS for e in ("b64", "media_type")}
        return cls(
            body=base64.b64decode(answer["image_b64"]),
            media_type=answer["media_type"],
            meta=ResultMeta.model_validate(answer["meta"]),
            attachments={key: value for key, value in answer.items() if key not in fixed},
            **{name: base64.b64decode(answer[f"{name}_b64"]) for name in COMPANIONS if answer.get(f"{name}_b64")},
        )

    def to_json(self) -> dict[str, Any]:
        """``return=json``: the image as base64 beside its metadata; a JSON result's own fields stand at the top."""
        if self.media_type == JSON_MEDIA_TYPE:
            return {**json.loads(self.body), "meta": self.meta.model_dump(), **self.attachments}
        return {
            "image_b64": base64.b64encode(self.body).decode("ascii"),
            "media_type": self.media_type,
            "meta": self.meta.model_dump(),
            **companions_json(self.companions(), self.media_type),
            **self.attachments,
        }


def companions_json(images: dict[str, bytes], media_type: str) -> dict[str, str]:
    """``<name>_b64`` and ``<name>_media_type`` for each companion image."""
    answer = {}
    for name, data in images.items():
        answer |= {f"{name}_b64": base64.b64encode(data).decode("ascii"), f"{name}_media_type": media_type}
    return answer


def output_format(requested: str, source: DecodedImage) -> str:
    """``auto`` keeps JPEG as JPEG (and WebP as WebP); everything else becomes PNG, which keeps alpha."""
    if requested != "auto":
        return requested
    return {"jpeg": "jpeg", "mpo": "jpeg", "webp": "webp"}.get(source.format, "png")


def encode_like_source(rgb: np.ndarray, fmt: str, source: DecodedImage) -> bytes:
    """Encode with the input's alpha (resized to the output), DPI and ICC profile."""
    alpha = resize_alpha(source.alpha, rgb.shape[1], rgb.shape[0])
    return encode_image(rgb, fmt, alpha=alpha, dpi=source.dpi, icc_profile=source.icc_profile)


def _colorized(decision: dict[str, Any]) -> str:
    """``yes``, or ``no: <why>`` (a restore's ``colorize`` decision, for a plain image response)."""
    return "yes" if decision["colorized"] else f"no: {decision['reason']}"


def result_headers(meta: ResultMeta) -> dict[str, str]:
    """The metadata a plain image response carries in headers (a stored result's too, streamed without its body)."""
    weights = ",".join(_weights_item(w) for w in meta.weights) or "none"
    report = meta.report or {}
    return {
        "X-Portrait-Engine": meta.engine,
        "X-Portrait-Weights": weights,
        "X-Portrait-Faces": str(meta.faces),
        **({"X-Portrait-Compliance": report["verdict"]} if "verdict" in report else {}),
        **({"X-Portrait-Colorized": _colorized(report["colorize"])} if "colorize" in report else {}),
        **_identity_header(meta.identity),
    }


def _identity_header(lowest: dict[str, Any] | None) -> dict[str, str]:
    """``X-Portrait-Identity``: the lowest similarity, its judge and verdict (``0.9312; judge=dlib; same_person``)."""
    if not lowest or "similarity" not in lowest:
        return {}
    verdict = "same_person" if lowest["same_person"] else "different_person"
    return {"X-Portrait-Identity": f"{lowest['similarity']:.4f}; judge={lowest['judge']}; {verdict}"}


def _weights_item(weights: WeightsOut) -> str:
    """``name@sha256-prefix``, then ``;label="..."`` (an HTTP quoted string: the label may hold commas) if any."""
    item = f"{weights.name}@{(weights.sha256 or 'unpinned')[:12]}"
    if weights.label:
        quoted = weights.label.replace("\\", "\\\\").replace('"', '\\"')
        item += f';label="{quoted}"'
    return item


def png_b64(rgb: np.ndarray) -> str:
    return base64.b64encode(encode_image(rgb, "png")).decode("ascii")


def engine_summary(infos: list[EngineInfo], fallback: str) -> tuple[str, list[WeightsOut]]:
    """One engine label for the response (``gpen``, ``classic-restore``; ``a+b`` when a batch mixed engines)."""
    if not infos:
        return fallback, []
    engines = sorted({info.engine for info in infos})
    weights = {
        info.weights: WeightsOut(
            name=info.weights, sha256=info.sha256, state=info.weights_state, label=info.weights_label
        )
        for info in infos
        if info.weights
    }
    return "+".join(engines), list(weights.values())


def build_meta(
    job: str,
    params: Any,
    engine: str,
    weights: list[WeightsOut],
    *,
    faces: int,
    size_wh: tuple[int, int],
    media_type: str,
    body: bytes | Path,
    timings_ms: dict[str, float],
    report: dict | None = None,
    identity: dict[str, Any] | None = None,
) -> ResultMeta:
    return ResultMeta(
        job=job,
        params=params.model_dump(by_alias=True),
        engine=engine,
        weights=weights,
        faces=faces,
        width=int(size_wh[0]),
        height=int(size_wh[1]),
        media_type=media_type,
        bytes=body.stat().st_size if isinstance(body, Path) else len(body),
        timings_ms=timings_ms,
        report=report,
        identity=identity,
        version=__version__,
    )


async def encode_job_result(
    params: JobParams,
    source: DecodedImage,
    rgb: np.ndarray,
    engines: list[EngineInfo],
    *,
    faces: int,
    timings: Timings,
    fallback_engine: str,
    attachments: dict[str, Any] | None = None,
    report: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
) -> JobResult:
    """The last step of the image-to-image jobs: encode like the source (in a worker thread) and describe it (the job
    is the one ``params`` belong to: ``registry.job_of``)."""
    fmt = output_format(params.format, source)
    with timings.phase("encode"):
        body = await run_in_worker(encode_like_source, rgb, fmt, source)
    engine, weights = engine_summary(engines, fallback=fallback_engine)
    meta = build_meta(
        job_of(params).name,
        params,
        engine,
        weights,
        faces=faces,
        size_wh=(rgb.shape[1], rgb.shape[0]),
        media_type=MEDIA_TYPES[fmt],
        body=body,
        timings_ms=timings.ms,
        report=report,
        identity=identity,
    )
    return JobResult(body=body, media_type=MEDIA_TYPES[fmt], meta=meta, attachments=attachments or {})
