"""Video on this CPU: frames/s per job (the classic engines, the built-in models), the jitter of the pasted face's
eye positions with and without the tracker's smoothing, and the peak memory of a 10 s and a 40 s clip.

Each measurement runs in-process through ``deployments/video/pipeline.py`` with ``in_process_backend`` (no Serve),
on the test clip: the astronaut's face crossing and zooming over a textured background, a 440 Hz tone.

    python bench/bench_video.py fps --seconds 4
    python bench/bench_video.py fps --neural --seconds 1 --width 160 --height 120   # GFPGAN v1.4, random weights
    python bench/bench_video.py jitter --seconds 4
    python bench/bench_video.py memory                # a 10 s and a 40 s clip, each in a fresh process
    python bench/bench_video.py job --width 1920 --height 1080 --seconds 4   # one job as a bucket route runs it
    python bench/bench_video.py store --result-mib 256   # storing a finished result: from bytes vs from its file
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from deployments.video.pipeline import FolderChunkStore, transcode_video  # noqa: E402
from deployments.video.probe import probe_video  # noqa: E402
from deployments.video.tracking import TrackingOptions  # noqa: E402
from serve_app.backend import Backend  # noqa: E402
from serve_app.jobs import job_context, parse_job_params  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.settings import Settings  # noqa: E402
from tests.unit.video.clips import make_clip  # noqa: E402


def _backend(neural_in: Path | None = None) -> Backend:
    """The built-in models; with ``neural_in``, a store there beside them holding GFPGAN v1.4 of the official
    architecture and size with random weights (the time of a forward pass does not depend on the weights)."""
    settings = Settings()
    manifest = load_manifest(settings.models_manifest)
    if neural_in is None:
        return in_process_backend(ModelStore(settings.model_store, manifest))
    import torch

    from deployments.restore.gfpgan import GfpganConfig, build_gfpgan

    for entry in Path(settings.model_store).iterdir():
        (neural_in / entry.name).symlink_to(entry.resolve())
    (neural_in / "gfpgan").mkdir()
    spec = manifest["gfpgan-v1.4"]
    torch.save({"params_ema": build_gfpgan(GfpganConfig()).state_dict()}, neural_in / spec.file)
    manifest = {**manifest, spec.name: replace(spec, sha256=None, size_bytes=None)}  # random weights: not the pin
    return in_process_backend(ModelStore(str(neural_in), manifest), restore_models=[spec.name])


def _run(task: str, clip: Path, work: Path, backend, tracking: TrackingOptions | None = None, record=None):
    context = job_context(Settings())
    options = context.video.options if tracking is None else replace(context.video.options, tracking=tracking)
    params = parse_job_params(task, {}, context)
    module = __import__(f"serve_app.jobs.{task}", fromlist=["frame_processor"])

    async def go():
        process = await module.frame_processor(backend, params, context)

        async def traced(rgb, faces):
            if record is not None:
                record.append([face.landmarks[:2].copy() for face in faces])
            return await process(rgb, faces)

        info = probe_video(clip, context.video.limits)
        return await transcode_video(
            clip, info, backend.analyze_faces, traced, FolderChunkStore(work), work / "out.mp4", options
        )

    return asyncio.run(go())


def fps(args) -> None:
    with tempfile.TemporaryDirectory() as folder:
        backend = _backend(Path(folder) if args.neural else None)
        clip = make_clip(Path(folder) / "clip.mp4", seconds=args.seconds, width=args.width, height=args.height)
        for task in ("restore",) if args.neural else ("restore", "cartoon"):
            start = time.perf_counter()
            cpu = time.process_time()
            report = _run(task, clip, Path(folder) / task, backend)
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            engines = sorted({info.engine for info in report.engines})
            print(
                json.dumps(
                    {
                        "task": task,
                        "frames": report.frames,
                        "wall_s": round(wall, 2),
                        "frames_per_s": round(report.frames / wall, 2),
                        "cpu_s_per_frame": round(cpu / report.frames, 3),
                        "engines": engines,
                        "timings_ms": report.timings_ms,
                    }
                )
            )


def _residual_px(eyes: np.ndarray) -> float:
    """RMS residual of each eye coordinate after a cubic fit along time (the slow motion of the face removed)."""
    t = np.arange(len(eyes))
    flat = eyes.reshape(len(eyes), -1)
    fit = np.stack([np.polyval(np.polyfit(t, flat[:, i], 3), t) for i in range(flat.shape[1])], axis=1)
    return float(np.sqrt(((flat - fit) ** 2).mean()))


def jitter(args) -> None:
    backend = _backend()
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        clip = make_clip(Path(folder) / "clip.mp4", seconds=args.seconds, width=args.width, height=args.height)
        for name, smooth in (("per-frame detection", False), ("tracked + smoothed", True)):
            record: list = []
            _run("restore", clip, Path(folder) / name, backend, TrackingOptions(smooth=smooth), record)
            eyes = np.stack([faces[0] for faces in record if faces])
            results[name] = round(_residual_px(eyes), 3)
    results["ratio"] = round(results["per-frame detection"] / results["tracked + smoothed"], 2)
    print(json.dumps({"clip_s": args.seconds, "size": [args.width, args.height], "jitter_px": results}))


def memory(args) -> None:
    for seconds in (10, 40):
        point = subprocess.run(
            [
                sys.executable,
                __file__,
                "peak",
                "--seconds",
                str(seconds),
                "--width",
                str(args.width),
                "--height",
                str(args.height),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(point.stdout.strip().splitlines()[-1])


def peak(args) -> None:
    """One clip, its job, then this process's peak resident memory."""
    backend = _backend()
    with tempfile.TemporaryDirectory() as folder:
        clip = make_clip(Path(folder) / "clip.mp4", seconds=args.seconds, width=args.width, height=args.height)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        report = _run("restore", clip, Path(folder) / "work", backend)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "clip_s": args.seconds,
                "frames": report.frames,
                "peak_rss_mib": round(peak_mib, 1),
                "before_job_mib": round(before / 1024, 1),
            }
        )
    )


def job(args) -> None:
    """One clip through a bucket folder route as the runner runs it (the object read, the job, the result and its
    record stored), then this process's peak resident memory and the result's size."""
    from tests.unit.runner.bucket_fixtures import make_worker

    backend = _backend()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "in").mkdir()
        make_clip(root / "in" / "clip.mp4", seconds=args.seconds, width=args.width, height=args.height)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        outcomes = asyncio.run(make_worker(root, backend, job_context(Settings()), task="restore").reconcile_all())
        wall_s = time.perf_counter() - start
        if [outcome.status.value for outcome in outcomes] != ["done"]:
            raise SystemExit(f"the job did not succeed: {outcomes}")
        result_bytes = (root / "out" / "clip.mp4").stat().st_size
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "clip_s": args.seconds,
                "size": [args.width, args.height],
                "result_mib": round(result_bytes / 2**20, 1),
                "peak_rss_mib": round(peak_mib, 1),
                "before_job_mib": round(before / 1024, 1),
                "wall_s": round(wall_s, 1),
            }
        )
    )


def store(args) -> None:
    """The memory the last step of a video job costs: a finished result of ``--result-mib`` (random bytes, as
    incompressible as video) stored into a local store read whole first (``put``, as before) and streamed from its
    file (``put_file``), each in a fresh process."""
    with tempfile.TemporaryDirectory() as folder:
        result = Path(folder) / "result.mp4"
        with result.open("wb") as handle:
            for _ in range(args.result_mib):
                handle.write(np.random.default_rng().bytes(2**20))
        for way in ("put", "put_file"):
            point = subprocess.run(
                [sys.executable, __file__, "store-once", "--way", way, "--result", str(result)],
                capture_output=True,
                text=True,
                check=True,
            )
            print(point.stdout.strip().splitlines()[-1])


def store_once(args) -> None:
    from storage.local import LocalStore

    target = LocalStore(Path(args.result).parent / f"store-{args.way}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.way == "put":
        target.put("out/clip.mp4", Path(args.result).read_bytes(), content_type="video/mp4")
    else:
        target.put_file("out/clip.mp4", Path(args.result), content_type="video/mp4")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    size_mib = Path(args.result).stat().st_size / 2**20
    print(
        json.dumps(
            {"way": args.way, "result_mib": round(size_mib), "added_peak_rss_mib": round((peak - before) / 1024, 1)}
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("fps", "jitter", "memory", "peak", "job", "store", "store-once"))
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--neural", action="store_true", help="fps: restore on GFPGAN v1.4 (random weights)")
    parser.add_argument("--result-mib", type=int, default=256, help="store: the size of the result stored")
    parser.add_argument("--way", choices=("put", "put_file"), help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    actions = {"fps": fps, "jitter": jitter, "memory": memory, "peak": peak, "job": job, "store": store}
    {**actions, "store-once": store_once}[args.what](args)


if __name__ == "__main__":
    main()
