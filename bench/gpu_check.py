"""One-shot GPU check: correctness and timings for every model, in one call on a lent GPU machine.

Runs with only torch, numpy, opencv, pillow and scikit-image (what the GPU image has; no Ray, no pydantic): the pure
model and image code of ``deployments/``. Every model gets random weights in its official file layout (the same
FLOPs as the released files), is written to a temporary folder and read back through our own loader, so load times
are real. Per model: load and first forward; output difference of TF32 convolutions and bf16 autocast against strict
fp32; throughput and peak memory at batch 1…64 in fp32 and bf16 (a precision stops at the first OOM, or when the next
batch would overrun the model's share of the time budget). Prints markdown tables as it goes, rewrites
``gpu_report.json`` in ``--out`` after each table, and ends with a summary table and one ``SUMMARY_JSON`` line.

    python3 bench/gpu_check.py --out "$OUT"             # on the GPU machine (bench/gpu_check.sh)
    python3 bench/gpu_check.py --device cpu --quick     # smoke test anywhere: tiny models, batches 1 and 2
    python3 bench/gpu_check.py --out "$OUT" --only renderer   # the SDXL renderer alone, with the whole budget

"fp32" in the throughput tables is torch's default (cuDNN may use TF32), as a replica runs; "strict" turns TF32 off.
Layouts are those ``configs/gpu.yaml`` deploys (channels-last for GPEN, GFPGAN and MODNet), plus the other layout at
one batch size to show whether that choice is right.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from bench.gpu.dctnet import dctnet_checks  # noqa: E402
from bench.gpu.ddcolor import check_ddcolor  # noqa: E402
from bench.gpu.harness import LOADS, Clock, Run, set_tf32  # noqa: E402
from bench.gpu.modnet import check_modnet  # noqa: E402
from bench.gpu.mtcnn import check_mtcnn  # noqa: E402
from bench.gpu.realesrgan import check_realesrgan  # noqa: E402
from bench.gpu.renderer import renderer_section  # noqa: E402
from bench.gpu.report import REPORT, summary  # noqa: E402
from bench.gpu.restorers import (  # noqa: E402
    QUICK_CODEFORMER,
    QUICK_GFPGAN,
    QUICK_GPEN,
    check_gpen,
    check_restorer,
    codeformer_restorer,
    gfpgan_restorer,
)
from bench.gpu.whole_photo import whole_photo_latency  # noqa: E402
from deployments.restore.codeformer import CODEFORMER_512  # noqa: E402
from deployments.restore.gfpgan import GfpganConfig  # noqa: E402
from deployments.restore.gpen import GPEN_VARIANTS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny models, batches 1 and 2 (CPU smoke test)")
    parser.add_argument("--out", type=Path, default=Path("test-output"))
    parser.add_argument("--budget-s", type=float, default=440.0, help="the whole run's time; sections get shares")
    parser.add_argument(
        "--models-dir", type=Path, default=REPO_ROOT / "models", help="released MODNet, SDXL weights, if carried"
    )
    parser.add_argument(
        "--only",
        choices=["renderer"],
        help="run this section alone, with the whole budget (the renderer is last in a full run and cut first)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    REPORT.path = args.out / "gpu_report.json"
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(min(2, torch.get_num_threads()))
    REPORT.data["environment"] = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "date": time.strftime("%Y-%m-%d"),
        "quick": args.quick,
    }
    print(json.dumps(REPORT.data["environment"]), flush=True)
    set_tf32(True)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        run = Run(device, Clock(args.budget_s), args.quick, Path(tmp), args.models_dir)
        failed = sections(run, args.only)
    if LOADS.rows:
        LOADS.report()
    summary()
    if failed:
        sys.exit(f"sections that failed: {', '.join(failed)} (tracebacks above, and under 'errors' in the report)")


def sections(run: Run, only: str | None = None) -> list[str]:
    """Most wanted first: if the budget runs out, what is cut is the end (``only``: that section alone). Returns the
    sections that failed."""
    quick = run.quick
    failed: list[str] = []

    def guarded(label: str, check: Callable[[], object]) -> object:
        """A failing section is reported (traceback, report entry, exit status) and the next one still runs."""
        try:
            return check()
        except Exception:  # one model's failure must not cost the others' numbers on a lent GPU
            traceback.print_exc()
            REPORT.data.setdefault("errors", {})[label] = traceback.format_exc(limit=4)
            REPORT.save()
            failed.append(label)
            return None
        finally:
            run.release()

    if only == "renderer":
        guarded("renderer", partial(renderer_section, run))
        return failed
    config = QUICK_GPEN if quick else GPEN_VARIANTS["gpen-bfr-512"]
    gpen = guarded("gpen-bfr-512", lambda: check_gpen(run, "gpen-bfr-512", config, share_s=45, cpu_reference=True))
    if gpen is not None and run.clock.left_s() > 200:
        concurrencies, photos = ([1], 2) if quick else ([1, 8, 32], 64)
        name = "gpen (tiny)" if quick else "gpen-bfr-512"
        latency = whole_photo_latency(run, name, gpen, concurrencies, photos)
        guarded("whole photo", partial(asyncio.run, latency))
    if gpen is not None and run.clock.left_s() > 250:
        guarded("video", partial(video_section, run, "gpen (tiny)" if quick else "gpen-bfr-512", gpen))
    del gpen  # its memory back before the next model's peaks
    gfpgan = gfpgan_restorer(QUICK_GFPGAN if quick else GfpganConfig())
    guarded("gfpgan-v1.4", lambda: check_restorer(run, gfpgan, share_s=40))
    codeformer = codeformer_restorer(QUICK_CODEFORMER if quick else CODEFORMER_512)
    guarded("codeformer", lambda: check_restorer(run, codeformer, share_s=50))
    guarded("realesrgan-x4plus", lambda: check_realesrgan(run, "realesrgan-x4plus", share_s=60))
    guarded("realesrgan-x2plus", lambda: check_realesrgan(run, "realesrgan-x2plus", share_s=30))
    guarded("modnet", lambda: check_modnet(run, share_s=20))
    guarded("mtcnn", lambda: check_mtcnn(run, share_s=12))
    for variant, share_s in (("tiny", 25), ("large", 40))[: 1 if quick else 2]:  # large is 912 MB: not in a smoke test
        guarded(f"ddcolor-{variant}", partial(check_ddcolor, run, variant, share_s=share_s))
    if not quick:
        gpen_256 = GPEN_VARIANTS["gpen-bfr-256"]
        guarded("gpen-bfr-256", lambda: check_gpen(run, "gpen-bfr-256", gpen_256, share_s=20, cpu_reference=False))
    if run.clock.left_s() > 25:
        sizes = {"288 head": (288, 288, [1])}
        if not quick:
            sizes = {"288 head": (288, 288, [1, 4, 16, 64]), "720p": (720, 1280, [1, 4, 16])}
        guarded("dctnet", lambda: dctnet_checks(run, sizes, repeats=1 if quick else 5))
    else:
        print(f"\nDCT-Net skipped: {run.clock.left_s():.0f} s of the budget left", flush=True)
    # last, cut first: SDXL through RendererPredictor (it says it did not run without diffusers or the budget)
    guarded("renderer", partial(renderer_section, run))
    return failed


def video_section(run: Run, name: str, gpen: torch.nn.Module) -> None:
    """Frames/s of a 1080p clip with one and with four faces (a quick run: a small clip); PyAV is imported only
    here, so a GPU image without it still runs every other section (the report says why this one did not)."""
    if importlib.util.find_spec("av") is None:
        REPORT.data["video"] = "not run: PyAV (av) is not installed in this image"
        print(f"\nVideo skipped: {REPORT.data['video']}", flush=True)
        return
    from bench.gpu.video import VideoCase, video_frames_per_s

    size = (320, 180, 12) if run.quick else (1920, 1080, 50)  # 2 s at 25 fps: slow enough for one track per head
    cases = [VideoCase(faces, *size) for faces in (1, 4)]
    asyncio.run(video_frames_per_s(run, name, gpen, cases))


if __name__ == "__main__":
    main()
