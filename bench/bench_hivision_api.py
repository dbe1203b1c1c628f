"""HivisionIDPhotos' routes against our own, whole HTTP requests in-process (FastAPI app over the local backend, no
Ray), one at a time, on a 12 MP JPEG: the cost of its wire format (form parsing, base64 answers, the HD copy).

    .venv/bin/python bench/bench_hivision_api.py [--repeats 5] [--image PATH]

The input is ``bench_idphoto.py``'s (an eval portrait or the scikit-image astronaut, upscaled to 3000x4000).
Reports p50/p90 milliseconds and the answer's size per route.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))

from bench_idphoto import percentile, portrait_jpeg  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from deployments.common.weights import ModelStore, load_manifest  # noqa: E402
from serve_app.local_backend import in_process_backend  # noqa: E402
from serve_app.routes import create_api  # noqa: E402
from serve_app.settings import Settings  # noqa: E402

CASES = {
    "POST /v1/idphoto (transparent png)": ("/v1/idphoto", "image", {"background": "transparent", "format": "png"}),
    "POST /idphoto (hd=false)": ("/idphoto", "input_image", {"hd": "false"}),
    "POST /idphoto (hd=true, its default)": ("/idphoto", "input_image", {}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--image", type=Path, default=None)
    parser.add_argument("--models", type=Path, default=REPO_ROOT / "models")
    args = parser.parse_args()
    data, name = portrait_jpeg(args.image)
    app = create_api()
    manifest = load_manifest(REPO_ROOT / "configs" / "models.yaml")
    app.state.backend = in_process_backend(ModelStore(args.models, manifest))
    app.state.settings = Settings()
    client = TestClient(app)
    results = {"image": name, "repeats": args.repeats}
    for label, (path, field, fields) in CASES.items():
        times, size = [], 0
        for _ in range(args.repeats + 1):  # the first warms the models up and is not counted
            start = time.perf_counter()
            answer = client.post(path, files={field: ("photo.jpg", data, "image/jpeg")}, data=fields)
            times.append((time.perf_counter() - start) * 1000.0)
            if answer.status_code != 200:
                raise SystemExit(f"{label}: {answer.status_code} {answer.text[:300]}")
            size = len(answer.content)
        results[label] = {"p50_ms": percentile(times[1:], 0.5), "p90_ms": percentile(times[1:], 0.9), "bytes": size}
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
