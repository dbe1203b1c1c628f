"""Peak memory of the largest request each job admits (``deployments/common/admission.py``), on the CPU, each request
in a fresh process: the in-process stages (``in_process_backend``), so decode, analysis, compositing and encoding all
count.

What the caps bound (#21 rows 1, 8, 9): an ID photo at the 4 MP output cap with a KB window (the quality search
encodes many times), a cartoon of a 50 MP photo, a restore at ``upscale`` 4 of a 4 MP photo (64 MP out) and at 2 of
a 16 MP one, and DCT-Net's forward pass at its largest input (720x2048, random weights: activations do not depend on
them). Neural weights this box lacks run on their documented fallback engines; the row says which.

    python bench/memory_jobs.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

MAKE_PHOTO = r"""
import sys, cv2, numpy as np
sys.path.insert(0, {root!r})
from skimage import data
from deployments.common.image import encode_image
width, height = {width}, {height}
face = cv2.resize(data.astronaut(), (min(width, height),) * 2, interpolation=cv2.INTER_CUBIC)
photo = np.zeros((height, width, 3), np.uint8)
photo[:] = (120, 140, 160)
photo[: face.shape[0], : face.shape[1]] = face
open({path!r}, "wb").write(encode_image(photo, "jpeg", quality=90))
"""

JOB = r"""
import asyncio, json, resource, sys
sys.path.insert(0, {root!r})
from deployments.common.weights import ModelStore, load_manifest
from serve_app.jobs import job_context, parse_job_params, run_job
from serve_app.local_backend import in_process_backend
from serve_app.settings import Settings

settings = Settings()
backend = in_process_backend(ModelStore(settings.model_store, load_manifest(settings.models_manifest)))
context = job_context(settings)
data = open({path!r}, "rb").read()
params = parse_job_params({task!r}, {fields!r}, context)


def rss_mib():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


async def main():
    # A first small run loads every model and thread pool, so the baseline holds them.
    small = open({small!r}, "rb").read()
    await run_job(backend, {task!r}, small, params, context)
    baseline = rss_mib()
    result = await run_job(backend, {task!r}, data, params, context)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({{"baseline_mib": baseline, "peak_mib": peak, "engine": result.meta.engine,
                      "bytes_out": len(result.body)}}))


asyncio.run(main())
"""

DCTNET = r"""
import json, resource, sys, torch, numpy as np
sys.path.insert(0, {root!r})
torch.set_num_threads(2)
from deployments.cartoon.dctnet import build_dctnet_from_constants, official_weight_shapes
constants = {{k: np.zeros(s, np.float32) for k, s in official_weight_shapes().items()}}
model = build_dctnet_from_constants(constants, eps=0.01)
x = torch.zeros(1, 3, {height}, {width})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with torch.inference_mode():
    model.forward_batch(x)
print(json.dumps({{"peak_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}}))
"""

# (label, task, params, input width, input height)
JOBS = [
    (
        "idphoto, 2000x2000 output (4 MP cap), max_kb 300",
        "idphoto",
        {"width_px": 2000, "height_px": 2000, "max_kb": 300},
        4000,
        3000,
    ),
    ("cartoon of a 50 MP photo (10000x5000)", "cartoon", {"style": "anime"}, 10000, 5000),
    ("restore x4 of a 4 MP photo (2000x2000 -> 8000x8000)", "restore", {"upscale": 4}, 2000, 2000),
    ("restore x2 of a 16 MP photo (4000x4000 -> 8000x8000)", "restore", {"upscale": 2}, 4000, 4000),
]


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_photo(folder: Path, width: int, height: int) -> Path:
    path = folder / f"photo_{width}x{height}.jpg"
    if not path.exists():
        subprocess.run(
            [sys.executable, "-c", MAKE_PHOTO.format(root=str(REPO_ROOT), width=width, height=height, path=str(path))],
            check=True,
        )
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small = make_photo(folder, 512, 512)
        print("| request | engine | process baseline MiB | peak MiB | peak above baseline MiB |")
        print("|---|---|---|---|---|")
        for label, task, fields, width, height in JOBS:
            path = make_photo(folder, width, height)
            code = JOB.format(root=str(REPO_ROOT), path=str(path), small=str(small), task=task, fields=fields)
            result = run(code)
            above = result["peak_mib"] - result["baseline_mib"]
            print(
                f"| {label} | {result['engine']} | {result['baseline_mib']:,.0f} | {result['peak_mib']:,.0f} | "
                f"{above:,.0f} |",
                flush=True,
            )
    for height, width in ((720, 1280), (720, 2048)):
        result = run(DCTNET.format(root=str(REPO_ROOT), height=height, width=width))
        print(f"| DCT-Net forward, {width}x{height} (batch 1) | dctnet | | | {result['peak_mib']:,.0f} |", flush=True)
    print("\n(ru_maxrss and /proc/self/statm; python bench/memory_jobs.py)")


if __name__ == "__main__":
    main()
