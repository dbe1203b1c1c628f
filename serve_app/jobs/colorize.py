"""Colorization of a black-and-white photo, as the official DDColor inference does it: the network sees the photo's
lightness at ``input_size``² (batched across requests in the Colorizer), its colours are laid on the photo's own
full-resolution lightness here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from deployments.colorize.params import ColorizeParams
from deployments.colorize.pipeline import DEFAULT_SIZE_PX, gray_input, join_color
from deployments.colorize.types import COLORIZE, DEFAULT_COLORIZE_MODEL, PhotoToColorize
from deployments.common.admission import COLORIZE_OUTPUT
from deployments.common.engine import EngineInfo
from deployments.common.params import parse_params
from serve_app.backend import Backend
from serve_app.jobs.context import JobContext, Timings, decode_upload
from serve_app.jobs.deadline import run_in_worker
from serve_app.jobs.results import JobResult, encode_job_result


def parse(fields: Mapping[str, Any], context: JobContext) -> ColorizeParams:
    return parse_params(ColorizeParams, fields)


async def colorize_photo(
    backend: Backend, rgb: np.ndarray, model: str, timings: Timings, size_px: int = DEFAULT_SIZE_PX
) -> tuple[np.ndarray, EngineInfo]:
    """``rgb`` in colour and the engine that coloured it; ``ModelUnavailable`` (503, with the command that fetches
    the weights) when ``model``'s weights are absent."""
    with timings.phase("prepare"):
        gray = await run_in_worker(gray_input, rgb, size_px)
    with timings.phase("colorize"):
        predicted = await backend.call(COLORIZE, PhotoToColorize(gray, model))
    with timings.phase("join"):
        colored = await run_in_worker(join_color, rgb, predicted.ab)
    return colored, predicted.engine


async def run(backend: Backend, data: bytes, params: ColorizeParams, context: JobContext) -> JobResult:
    timings = Timings()
    with timings.phase("decode"):
        source = await decode_upload(data, context.limits, COLORIZE_OUTPUT)
    model = params.model or await backend.call(DEFAULT_COLORIZE_MODEL)
    colored, engine = await colorize_photo(backend, source.rgb, model, timings, params.input_size)
    return await encode_job_result(
        params.model_copy(update={"model": model}),
        source,
        colored,
        [engine],
        faces=0,
        timings=timings,
        fallback_engine="none",
    )
