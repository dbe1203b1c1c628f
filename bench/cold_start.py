"""Cold start per model deployment: kill its only replica, then time until a request that needs it is answered.

With one replica per deployment (``configs/local.yaml``) a kill leaves zero replicas: the time covers Serve noticing,
a new actor starting, the model loading (weights from the store) and the first answer. Needs a running
``serve run configs/local.yaml`` on this machine.

    python -m bench.cold_start --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import time

import httpx
import ray

from bench.load_test import kill_one_replica, portrait_jpeg

# Which request exercises which deployment.
PROBES = {
    "FaceAnalyzer": ("/v1/faces", {}),
    "PortraitMatter": ("/v1/idphoto", {"spec": "cn-1inch"}),
    "FaceRestorer512": ("/v1/restore", {"model": "gpen-bfr-512"}),
    "FaceRestorer256": ("/v1/restore", {"model": "gpen-bfr-256"}),
    "CartoonHead": ("/v1/cartoon", {"style": "anime"}),
    "CartoonBackground": ("/v1/cartoon", {"style": "anime"}),
}


def answer_after_kill(client: httpx.Client, deployment: str, photo: bytes, timeout_s: float) -> tuple[float, int]:
    route, fields = PROBES[deployment]
    kill_one_replica(deployment)
    start = time.perf_counter()
    attempts = 0
    while time.perf_counter() - start < timeout_s:
        attempts += 1
        answer = client.post(route, files={"image": ("p.jpg", photo, "image/jpeg")}, data=fields)
        if answer.status_code == 200:
            return time.perf_counter() - start, attempts
        time.sleep(0.2)
    raise TimeoutError(f"{deployment} did not answer within {timeout_s}s of the kill")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--deployments", default=",".join(PROBES))
    parser.add_argument("--timeout-s", type=float, default=180.0)
    args = parser.parse_args()
    ray.init(address="auto", namespace="serve", log_to_driver=False)
    photo = portrait_jpeg()
    print("| deployment | warm request s | zero replicas -> first answer s | attempts |")
    print("|---|---|---|---|")
    with httpx.Client(base_url=args.url, timeout=300.0) as client:
        for deployment in args.deployments.split(","):
            route, fields = PROBES[deployment]
            start = time.perf_counter()
            client.post(route, files={"image": ("p.jpg", photo, "image/jpeg")}, data=fields).raise_for_status()
            warm_s = time.perf_counter() - start
            cold_s, attempts = answer_after_kill(client, deployment, photo, args.timeout_s)
            print(f"| {deployment} | {warm_s:.2f} | {cold_s:.2f} | {attempts} |", flush=True)


if __name__ == "__main__":
    main()
