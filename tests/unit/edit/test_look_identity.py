"""The film looks keep the person through the edit job as a caller gets it (the faces restored first, each face's
fine detail kept under the look): the eval photos whose small, old faces a look used to move below the identity
judge's bar (docs/BENCHMARKS.md "Film looks"; the whole set: ``python bench/bench_looks.py``)."""

from __future__ import annotations

import asyncio

import pytest

from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.settings import Settings

pytestmark = pytest.mark.eval


@pytest.mark.parametrize("look", ["grain", "faded", "bw"])
@pytest.mark.parametrize("photo", ["whole/gfpgan_10045.png", "whole/codeformer_02.png"])
def test_a_look_keeps_every_face_of_an_old_photo_the_same_person(shared_dir, local_backend, photo, look):
    context = job_context(Settings())
    params = parse_job_params("edit", {"look": look, "return": "json"}, context)
    data = (shared_dir / "eval" / photo).read_bytes()
    result = asyncio.run(run_job(local_backend, "edit", data, params, context))
    lowest = result.meta.identity
    assert lowest["same_person"], lowest
