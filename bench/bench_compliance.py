"""The compliance gate on a CPU: false refusals and time per photo over every evaluation photo (``../shared/eval``,
skipped when absent) and skimage's portraits (the astronaut, the cameraman).

Per photo: the refused-class findings of NudeNet in the photo and in its mirror (any score NudeNet reports, from 0.25),
whether the gate refuses it, and the gate's time (one intra-op thread, as a replica runs it; median of ``--repeats``
after a warm-up): the whole photo and its mirror through ``CompliancePredictor.check``, the detector on the photo
alone, and the JPEG ``data:`` URL the language model gets (the ingress's share when an LLM is configured). Then the
time per photo of a batch of 8.

    .venv/bin/python bench/bench_compliance.py --repeats 5
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.image import decode_image  # noqa: E402
from deployments.common.settings import get_model_settings  # noqa: E402
from deployments.compliance.nudenet import NudeNetDetector  # noqa: E402
from deployments.compliance.predictor import REFUSED_CLASSES, CompliancePredictor, GateOptions  # noqa: E402
from deployments.compliance.types import PhotoToCheck  # noqa: E402
from serve_app.jobs.compliance import data_url  # noqa: E402

SHARED_EVAL = Path(os.environ.get("PORTRAIT_SHARED_DIR", REPO_ROOT.parent / "shared")) / "eval"


def photos() -> dict:
    from skimage import data

    found = {}
    if SHARED_EVAL.is_dir():
        for path in sorted(SHARED_EVAL.rglob("*")):
            if path.suffix.lower() in (".jpg", ".jpeg", ".png", ".webp"):
                found[str(path.relative_to(SHARED_EVAL))] = decode_image(path.read_bytes()).rgb
    else:
        print(f"{SHARED_EVAL} is absent: skimage's portraits only")
    import numpy as np

    found["skimage astronaut"] = np.ascontiguousarray(data.astronaut())
    found["skimage camera"] = np.ascontiguousarray(np.dstack([data.camera()] * 3))
    return found


def strongest(found) -> str:
    return ", ".join(f"{d.label} {d.score:.2f}" for d in found if d.label in REFUSED_CLASSES) or "none"


def timed(function, repeats: int, clock=time.perf_counter) -> float:
    """Median milliseconds of ``function`` by ``clock`` (wall; ``time.process_time``: this process's CPU, which
    other load on the machine does not inflate)."""
    function()
    times = []
    for _ in range(repeats):
        start = clock()
        function()
        times.append(clock() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import cv2
    import onnxruntime

    cv2.setNumThreads(1)
    store = get_model_settings().open_model_store()
    gate = CompliancePredictor(store)
    detector = NudeNetDetector(store.resolve("nudenet-320n"))
    print(
        f"onnxruntime {onnxruntime.__version__}, 1 thread; refused classes {', '.join(REFUSED_CLASSES)}; "
        f"min_score {GateOptions().min_score}, mirror check on"
    )
    print(
        "| photo | size | refused-class findings (photo / mirror) | refused | gate ms (CPU ms) | detector ms "
        "| data URL ms |"
    )
    print("|---|---|---|---|---|---|---|")
    refusals, gate_ms, gate_cpu_ms = 0, [], []
    images = photos()
    for name, rgb in images.items():
        item = PhotoToCheck(rgb)
        [verdict] = gate.check([item])
        mirrored = detector.detect([rgb[:, ::-1].copy()])[0]

        refusals += not verdict.passed
        ms = timed(functools.partial(gate.check, [item]), args.repeats)
        cpu = timed(functools.partial(gate.check, [item]), args.repeats, time.process_time)
        gate_ms.append(ms)
        gate_cpu_ms.append(cpu)
        alone = timed(functools.partial(detector.detect, [rgb]), args.repeats)
        url = timed(functools.partial(data_url, rgb), args.repeats)
        print(
            f"| {name} | {rgb.shape[1]}x{rgb.shape[0]} | {strongest(verdict.detections)} / {strongest(mirrored)} "
            f"| {'yes' if not verdict.passed else 'no'} | {ms:.0f} ({cpu:.0f}) | {alone:.0f} | {url:.0f} |",
            flush=True,
        )
    batch = [PhotoToCheck(rgb) for rgb in list(images.values())[:8]]
    per_photo = timed(functools.partial(gate.check, batch), args.repeats) / len(batch)
    print(
        f"\nfalse refusals: {refusals} of {len(images)} photos; gate per photo alone: median "
        f"{statistics.median(gate_ms):.0f} ms wall, {statistics.median(gate_cpu_ms):.0f} ms CPU (max "
        f"{max(gate_ms):.0f} / {max(gate_cpu_ms):.0f}); {per_photo:.0f} ms wall per photo in a batch of {len(batch)}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
