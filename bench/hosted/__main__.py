"""``python -m bench.hosted``: keys across two ingress replicas, then the jobs API under faults (see its modules)."""

from __future__ import annotations

import argparse
import asyncio
import io
import json

import numpy as np
from PIL import Image

from bench.hosted.keys_check import check_keys, key_entries
from bench.hosted.service import running_service


def small_photo(side: int = 192) -> bytes:
    from skimage import data

    image = Image.fromarray(np.ascontiguousarray(data.astronaut())).resize((side, side))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate-requests", type=int, default=40)
    parser.parse_args()
    args = {"auth": {"keys": key_entries()}}
    with running_service(args, {}) as url:
        figures = asyncio.run(check_keys(url, small_photo()))
        print(json.dumps(figures.__dict__, indent=2))


if __name__ == "__main__":
    main()
