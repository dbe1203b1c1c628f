"""One phase timer (``deployments.common.timings.Timings``) for a job's phases, an ID photo's render and a video's
chunks: no other module of the pipelines reads the clock for a phase."""

from __future__ import annotations

import time
from pathlib import Path

from deployments.common.timings import Timings
from serve_app.jobs.context import Timings as JobTimings

REPO_ROOT = Path(__file__).resolve().parents[3]
# Clocks that time no phase: the backfill CLI's rate and elapsed time.
OTHER_CLOCKS = {"serve_app/backfill.py"}


def test_a_phase_timed_twice_adds_up_in_milliseconds():
    timings = Timings()
    for _ in range(2):
        with timings.phase("decode"):
            time.sleep(0.01)
    with timings.phase("encode"):
        pass
    assert set(timings.ms) == {"decode", "encode"} and 20.0 <= timings.ms["decode"] < 1000.0
    assert timings.ms["decode"] == round(timings.ms["decode"], 2)


def test_the_jobs_time_their_phases_with_the_same_timer():
    assert JobTimings is Timings


def test_no_other_module_keeps_a_phase_clock():
    clocks = {
        str(path.relative_to(REPO_ROOT))
        for package in ("deployments", "serve_app")
        for path in (REPO_ROOT / package).rglob("*.py")
        if "perf_counter" in path.read_text(encoding="utf-8")
    }
    assert clocks - OTHER_CLOCKS == {"deployments/common/timings.py"}
