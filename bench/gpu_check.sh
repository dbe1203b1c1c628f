#!/usr/bin/env bash
# The device check, in one call: `run` with command `bash bench/gpu_check.sh`, timeout_s 540, and carry ["models"]
# (optional: the released MODNet, for a bf16 check on real weights; every model is timed on random weights anyway).
# About 7 minutes on an H200 (gpu_check.py keeps to --budget-s 440 and cuts the last sections first).
# bench/gpu_check.py is the entry; its parts (timing, report, one module per model family) are in bench/gpu/.
# Uses the GPU image's python3 (torch, numpy, opencv, pillow, scikit-image; PyAV for the video section, which says
# it did not run without it); results land in $OUT:
# gpu_report.json (rewritten after every table), gpu_check.log, nvidia-smi.csv.
# Last, and cut first when the budget runs short: the SDXL renderer (bench/gpu/renderer.py, RendererPredictor: cold
# start, s/image p50/p95 at 1024² 30 and 8 steps, images/s and peak memory at batch 1-8 without, with one and with
# two ControlNets, torch.compile of the UNet). It needs diffusers and pydantic, which the GPU image lacks: `make
# gpu-wheels` puts them in .whl/ (9 MB, for the image's Python 3.12), carry ".whl" too and they are installed below
# (without them the section reports that it did not run). It runs on random weights of the real SDXL architecture
# unless models/ holds the generative entries (~12 GB: over the 64 MiB carry). With the whole budget:
# `timeout 500 python3 bench/gpu_check.py --out "$OUT" --only renderer`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "${OUT:-test-output}/nvidia-smi.csv"
timeout 500 python3 bench/gpu_check.py --out "${OUT:-test-output}" 2>&1 | tee "${OUT:-test-output}/gpu_check.log"
