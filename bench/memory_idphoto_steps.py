"""Peak memory of one large image on each ID-photo step route and each HivisionIDPhotos route (#32 finding 5).

The FastAPI app in-process on the in-process engines (``in_process_backend``: decode, compliance gate, matting, face
analysis, compositing and encoding all count), one fresh process per row. The image is a flat-colour RGBA PNG (a
person-shaped opaque block on a transparent canvas: a few hundred KB at 7000x7000, what a hostile caller sends for
free). After a small warm-up request on the same route (models and pools loaded), the peak resident set (``VmHWM``,
reset through ``/proc/self/clear_refs``) minus the resident set before the request.

    .venv/bin/python bench/memory_idphoto_steps.py                      # every route, 7000x7000
    .venv/bin/python bench/memory_idphoto_steps.py --size 4000x4000 --route /v1/idphoto/matte
    .venv/bin/python bench/memory_idphoto_steps.py --tree /tmp/before   # the same rows against another checkout
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# route -> (form fields, file field): the step routes take ``image``, HivisionIDPhotos' ``input_image``.
ROUTES: dict[str, tuple[dict[str, str], str]] = {
    "/v1/idphoto/matte": ({}, "image"),
    "/v1/idphoto/crop": ({"spec": "cn-1inch"}, "image"),
    "/v1/idphoto/background": ({"background": "blue", "format": "png"}, "image"),
    "/v1/idphoto/watermark": ({"watermark_text": "SAMPLE", "format": "png"}, "image"),
    "/v1/idphoto/layout": ({"layout": "6inch"}, "image"),
    "/v1/idphoto/filesize": ({"max_kb": "200"}, "image"),
    "/idphoto": ({"height": "413", "width": "295"}, "input_image"),
    "/human_matting": ({}, "input_image"),
    "/add_background": ({"color": "628bce"}, "input_image"),
    "/generate_layout_photos": ({"height": "413", "width": "295"}, "input_image"),
    "/watermark": ({"text": "SAMPLE"}, "input_image"),
    "/set_kb": ({"kb": "50"}, "input_image"),
    "/idphoto_crop": ({"height": "413", "width": "295"}, "input_image"),
}


def flat_cut_out_png(width: int, height: int) -> bytes:
    """A flat colour on nothing: an opaque block (the middle third across, the lower two thirds down) with a soft
    edge, transparent around it; PNG compresses it to almost nothing."""
    import numpy as np

    from deployments.common.image import encode_image

    rgb = np.empty((height, width, 3), np.uint8)
    rgb[:] = (120, 140, 160)
    alpha = np.zeros((height, width), np.uint8)
    alpha[height // 3 :, width // 3 : 2 * width // 3] = 255
    alpha[height // 3 - 2 : height // 3, width // 3 : 2 * width // 3] = 128  # a semi-transparent edge
    return encode_image(rgb, "png", alpha=alpha)


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def one(route: str, size_wh: tuple[int, int]) -> dict:
    """One request of ``size_wh`` to ``route``, in this process (the tree is the one on ``sys.path``)."""
    from fastapi.testclient import TestClient

    from deployments.common.weights import ModelStore, load_manifest
    from serve_app.local_backend import in_process_backend
    from serve_app.routes import create_api
    from serve_app.settings import Settings

    settings = Settings()
    app = create_api()
    app.state.backend = in_process_backend(ModelStore(settings.model_store, load_manifest(settings.models_manifest)))
    app.state.settings = settings
    client = TestClient(app, raise_server_exceptions=False)
    fields, file_field = ROUTES[route]

    def post(image: bytes):
        return client.post(route, files={file_field: ("x.png", image, "image/png")}, data=fields)

    warm = post(flat_cut_out_png(300, 400))
    image = flat_cut_out_png(*size_wh)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    before_kib = _status_kib("VmRSS")
    started = time.monotonic()
    answer = post(image)
    seconds = time.monotonic() - started
    peak_kib = _status_kib("VmHWM")
    body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
    error = body.get("error") or {}
    return {
        "route": route,
        "size": f"{size_wh[0]}x{size_wh[1]}",
        "png_kb": round(len(image) / 1024),
        "warm_status": warm.status_code,
        "status": answer.status_code,
        "answer": error.get("message") or error.get("code") or ("status true" if body.get("status") else "image"),
        "rss_before_mib": round(before_kib / 1024),
        "peak_above_mib": round((peak_kib - before_kib) / 1024, 1),
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="7000x7000", help="WIDTHxHEIGHT of the PNG (7000x7000: 49 MP)")
    parser.add_argument("--route", action="append", choices=list(ROUTES), help="a route (repeatable; all by default)")
    parser.add_argument("--tree", type=Path, default=REPO_ROOT, help="the checkout to measure (its code, this bench)")
    parser.add_argument("--one", action="store_true", help="measure one route in this process (what each row runs)")
    args = parser.parse_args()
    size_wh = tuple(int(v) for v in args.size.lower().split("x"))
    if args.one:
        sys.path.insert(0, str(args.tree))
        print(json.dumps(one(args.route[0], size_wh)))
        return
    print("| route | image | status | answer | peak above the warmed process MiB | seconds |")
    print("|---|---|---|---|---|---|")
    for route in args.route or ROUTES:
        done = subprocess.run(
            [sys.executable, __file__, "--one", "--route", route, "--size", args.size, "--tree", str(args.tree)],
            capture_output=True,
            text=True,
            cwd=args.tree,
        )
        if done.returncode != 0:
            print(f"| `{route}` | {args.size} | crashed | {done.stderr.strip().splitlines()[-1:]} | | |", flush=True)
            continue
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| `{route}` | {row['size']} PNG, {row['png_kb']} KB | {row['status']} | {row['answer'][:90]} | "
            f"{row['peak_above_mib']:,} | {row['seconds']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
