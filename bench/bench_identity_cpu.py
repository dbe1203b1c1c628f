"""CPU time per face of dlib's face recognition ResNet: dlib itself against our PyTorch port of the same ``.dat``.

Both read 150² chips cut by dlib (the astronaut's face, then noisy copies of it) and compute the same descriptors
(the largest difference is printed). CPU ms above wall ms would mean more than one core. Needs the built-in models
(``portrait models pull --builtin``).

    .venv/bin/python bench/bench_identity_cpu.py --threads 1 --batches 1,8 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deployments.common.settings import get_model_settings  # noqa: E402
from deployments.identity.dlib_resnet import descriptors, face_chips, load_dlib_resnet  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8", help="comma-separated batch sizes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (dlib's CNN code is its own)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point (after one warm-up)")
    return parser.parse_args()


def time_runs(run: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Median wall seconds of ``run``, the fastest, and median CPU seconds (this process; on a shared machine the
    closer to what one free core would take)."""
    run()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), min(walls), statistics.median(cpus)


def timed(what: str, make: Callable[[], object]) -> object:
    start = time.perf_counter()
    made = make()
    print(f"{what}: {time.perf_counter() - start:.2f} s")
    return made


def main() -> None:
    import dlib
    from skimage import data

    args = parse_args()
    torch.set_num_threads(args.threads)
    batches = [int(b) for b in args.batches.split(",")]
    store = get_model_settings().open_model_store()
    recognition, shapes = store.resolve("dlib-face-recognition"), store.resolve("dlib-shape-5")
    recognizer = timed("dlib loads the .dat", lambda: dlib.face_recognition_model_v1(str(recognition)))
    port = timed("the port loads the .dat", lambda: load_dlib_resnet(recognition))

    image = data.astronaut()
    box = min(dlib.get_frontal_face_detector()(image, 1), key=lambda b: abs(b.center().x - 235))  # her face
    shape = dlib.shape_predictor(str(shapes))(image, box)
    chip_s = time_runs(lambda: face_chips(image, [shape]), args.repeats)[0]
    face = face_chips(image, [shape])[0]
    rng = np.random.default_rng(0)
    noisy = [np.clip(face + rng.normal(0, 8, face.shape), 0, 255).astype(np.uint8) for _ in range(max(batches))]
    chips = np.stack([face, *noisy])

    print(f"torch {torch.__version__}, {args.threads} thread(s); dlib {dlib.__version__}")
    print(f"cutting one chip (dlib): {chip_s * 1e3:.1f} ms")
    print(f"{'engine':<8}{'batch':>6}{'wall ms/face':>14}{'best':>8}{'cpu ms/face':>13}")
    for batch in batches:
        few = chips[:batch]
        dlib_runs = time_runs(lambda few=few: recognizer.compute_face_descriptor(list(few), 0), args.repeats)
        port_runs = time_runs(lambda few=few: descriptors(port, few, batch_size=len(few)), args.repeats)
        for engine, (median_s, best_s, cpu_s) in (("dlib", dlib_runs), ("torch", port_runs)):
            per_face = (f"{seconds / batch * 1e3:.1f}" for seconds in (median_s, best_s, cpu_s))
            print(f"{engine:<8}{batch:>6}{next(per_face):>14}{next(per_face):>8}{next(per_face):>13}")
        expected = np.asarray([np.asarray(v) for v in recognizer.compute_face_descriptor(list(few), 0)])
        print(f"  largest difference at batch {batch}: {np.abs(descriptors(port, few) - expected).max():.1e}")


if __name__ == "__main__":
    main()
