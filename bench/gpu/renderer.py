"""The Renderer (``deployments/render/``) on the device: our ``RendererPredictor`` loading SDXL through the model store
and rendering through ``render``, so every number is our code's (grouping by compatibility key, per-item generators,
``from_pipe``, the ControlNet condition batches, the uint8 conversion).

Weights: the store's real files when ``--models-dir`` (``models/``, carried) holds the ``generative`` entries of
``configs/models.yaml`` that this section runs (``sdxl-base-1.0``, ``controlnet-openpose-sdxl``,
``controlnet-canny-sdxl``); otherwise random weights of the real architectures (the official SDXL base 1.0 UNet, VAE and
both CLIP text encoders, configs below as the repository publishes them; a ControlNet as xinsir's, the UNet's encoder
copied by ``ControlNetModel.from_unet``), written in fp16 in the official layout (``model_index.json``,
``*.fp16.safetensors``) with a folder manifest of the same entries, and loaded by the predictor from that store. The
same FLOPs, so the same times; the report's ``renderer_weights`` says which ran. The tokenizers are CLIP BPE tokenizers
over a small vocabulary (``tests/unit/render/tiny_sdxl.py``): prompts are padded to 77 tokens either way.

Measured: cold start (predictor made → first image, the store's hash check and ``from_pretrained`` included); s/image
p50/p95 at batch 1 at 1024² and 30 steps, and at 8 steps (an LCM/Lightning-like step count, same scheduler); images/s
and peak memory at batch 1/2/4/8 through ``render`` with one compatibility key (one pipeline call per batch), without
ControlNet, with one and with two; ``torch.compile`` of the UNet against eager (compiled in place, as
``RendererOptions(compile=True)`` does); the neural editors of the edit job: InstructPix2Pix (the SDXL UNet with 8 input
channels, random weights in its layout as the base's) at its 768² training size and FLUX.2 [klein] 4B at 1024² where its
real files are in ``models/`` (its transformer's config is not carried here, so no random stand-in), s/image at batch 1
and images/s at batch 4. ``--quick``: tiny parts of the same layout at 64², 2 and 1 steps, batches 1 and 2 (a CPU smoke
test). Needs diffusers and transformers, and pydantic (the model store's import chain): without one the report says the
section did not run and why.
"""

from __future__ import annotations

import gc
import math
import os
import shutil
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.gpu.harness import Run
from bench.gpu.report import REPORT

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIPPED_MANIFEST = REPO_ROOT / "configs" / "models.yaml"
KEY = "renderer-sdxl"
BASE = "sdxl-base-1.0"
OPENPOSE = "controlnet-openpose-sdxl"
CANNY = "controlnet-canny-sdxl"
INSTRUCT = "sdxl-instructpix2pix-768"  # the edit job's model=instructpix2pix
FLUX2 = "flux2-klein-4b"  # the edit job's model=flux2-klein: timed only where its real files are in models/
USED = (BASE, OPENPOSE, CANNY, INSTRUCT)  # the ip-adapter-plus-face-sdxl entry is not timed here
EDIT_STEPS = 20  # the edit job's default steps (FLUX.2 klein is distilled to 4: timed at both)
CONTROLNET_SETS: tuple[tuple[str, ...], ...] = ((), (OPENPOSE,), (OPENPOSE, CANNY))
PROMPTS = (
    "a portrait of a smiling woman in a blue suit, studio light photo",
    "a portrait of a man in a red suit, studio light photo",
    "a smiling man, portrait photo, studio light",
    "a woman in a blue suit, portrait, light",
)
GUIDANCE = 5.0  # classifier-free guidance on: the UNet runs on 2B latents, as a portrait render does
MIN_BUDGET_S = 150.0  # a full run needs the weights written and loaded and a few renders; below this it is skipped

# The official stabilityai/stable-diffusion-xl-base-1.0 configs (unet/config.json, vae/config.json,
# text_encoder/config.json, text_encoder_2/config.json, scheduler/scheduler_config.json): 2.567 B UNet parameters,
# 83.7 M VAE, 123.1 M CLIP ViT-L text, 694.7 M OpenCLIP ViT-bigG text (5.14 GB, 167 MB, 246 MB, 1.39 GB in fp16).
SDXL_UNET: dict[str, Any] = {
    "act_fn": "silu",
    "addition_embed_type": "text_time",
    "addition_embed_type_num_heads": 64,
    "addition_time_embed_dim": 256,
    "attention_head_dim": [5, 10, 20],
    "block_out_channels": [320, 640, 1280],
    "center_input_sample": False,
    "class_embed_type": None,
    "class_embeddings_concat": False,
    "conv_in_kernel": 3,
    "conv_out_kernel": 3,
    "cross_attention_dim": 2048,
    "cross_attention_norm": None,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "downsample_padding": 1,
    "dual_cross_attention": False,
    "encoder_hid_dim": None,
    "encoder_hid_dim_type": None,
    "flip_sin_to_cos": True,
    "freq_shift": 0,
    "in_channels": 4,
    "layers_per_block": 2,
    "mid_block_only_cross_attention": None,
    "mid_block_scale_factor": 1,
    "mid_block_type": "UNetMidBlock2DCrossAttn",
    "norm_eps": 1e-05,
    "norm_num_groups": 32,
    "num_attention_heads": None,
    "num_class_embeds": None,
    "only_cross_attention": False,
    "out_channels": 4,
    "projection_class_embeddings_input_dim": 2816,
    "resnet_out_scale_factor": 1.0,
    "resnet_skip_time_act": False,
    "resnet_time_scale_shift": "default",
    "sample_size": 128,
    "time_cond_proj_dim": None,
    "time_embedding_act_fn": None,
    "time_embedding_dim": None,
    "time_embedding_type": "positional",
    "timestep_post_act": None,
    "transformer_layers_per_block": [1, 2, 10],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "upcast_attention": None,
    "use_linear_projection": True,
}
SDXL_VAE: dict[str, Any] = {
    "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "force_upcast": True,  # the base VAE decodes in fp32 (the pipeline upcasts it per call): timed as it runs
    "in_channels": 3,
    "latent_channels": 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "out_channels": 3,
    "sample_size": 1024,
    "scaling_factor": 0.13025,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
}
SDXL_TEXT_ENCODER: dict[str, Any] = {
    "architectures": ["CLIPTextModel"],
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "dropout": 0.0,
    "eos_token_id": 2,
    "hidden_act": "quick_gelu",
    "hidden_size": 768,
    "initializer_factor": 1.0,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 77,
    "model_type": "clip_text_model",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "projection_dim": 768,
    "vocab_size": 49408,
}
SDXL_TEXT_ENCODER_2: dict[str, Any] = {
    **SDXL_TEXT_ENCODER,
    "architectures": ["CLIPTextModelWithProjection"],
    "hidden_act": "gelu",
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_attention_heads": 20,
    "num_hidden_layers": 32,
    "projection_dim": 1280,
}
SDXL_SCHEDULER: dict[str, Any] = {
    "_class_name": "EulerDiscreteScheduler",
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "beta_start": 0.00085,
    "interpolation_type": "linear",
    "num_train_timesteps": 1000,
    "prediction_type": "epsilon",
    "steps_offset": 1,
    "timestep_spacing": "leading",
    "use_karras_sigmas": False,
}

# --quick: the same layout with tiny parts (tests/unit/render/tiny_sdxl.py's sizes), the VAE halving a side once
TINY_UNET: dict[str, Any] = {
    "block_out_channels": [8, 16],
    "layers_per_block": 1,
    "sample_size": 16,
    "in_channels": 4,
    "out_channels": 4,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"],
    "attention_head_dim": [2, 4],
    "use_linear_projection": True,
    "addition_embed_type": "text_time",
    "addition_time_embed_dim": 8,
    "transformer_layers_per_block": [1, 1],
    "projection_class_embeddings_input_dim": 6 * 8 + 32,
    "cross_attention_dim": 64,
    "norm_num_groups": 1,
}
TINY_VAE: dict[str, Any] = {
    "block_out_channels": [4, 8],
    "in_channels": 3,
    "out_channels": 3,
    "down_block_types": ["DownEncoderBlock2D"] * 2,
    "up_block_types": ["UpDecoderBlock2D"] * 2,
    "latent_channels": 4,
    "norm_num_groups": 2,
    "sample_size": 32,
}
TINY_TEXT_ENCODER: dict[str, Any] = {
    **SDXL_TEXT_ENCODER,
    "hidden_act": "gelu",
    "hidden_size": 32,
    "intermediate_size": 37,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "projection_dim": 32,
    "vocab_size": 1000,
}


@dataclass(frozen=True)
class Shape:
    """What one run renders: the architecture's configs, the render size, the two step counts, the batches."""

    unet: dict[str, Any]
    vae: dict[str, Any]
    text_encoder: dict[str, Any]
    text_encoder_2: dict[str, Any]
    conditioning_channels: tuple[int, ...]  # the ControlNet's condition embedding: halves a side as the VAE does
    size_px: int
    long_steps: int
    short_steps: int
    batches: tuple[int, ...]
    repeats: int  # timed calls per batch point, after one warm-up call
    max_samples: tuple[int, int]  # s/image samples at most, at long and at short steps


FULL = Shape(
    SDXL_UNET,
    SDXL_VAE,
    SDXL_TEXT_ENCODER,
    SDXL_TEXT_ENCODER_2,
    (16, 32, 96, 256),
    1024,
    30,
    8,
    (1, 2, 4, 8),
    2,
    (10, 15),
)
QUICK = Shape(
    TINY_UNET,
    TINY_VAE,
    TINY_TEXT_ENCODER,
    {**TINY_TEXT_ENCODER, "architectures": ["CLIPTextModelWithProjection"]},
    (4, 8),
    64,
    2,
    1,
    (1, 2),
    1,
    (2, 2),
)


def renderer_section(run: Run) -> None:
    """The section as ``gpu_check`` runs it: the report says why when it cannot run (a package missing, too little
    of the budget left); otherwise ``check_renderer``."""
    why = unavailable()
    if why is None and not run.quick and run.clock.left_s() < MIN_BUDGET_S:
        why = (
            f"{run.clock.left_s():.0f} s of the budget left, {MIN_BUDGET_S:.0f} s needed "
            "(python3 bench/gpu_check.py --only renderer gives it the whole budget)"
        )
    if why is not None:
        REPORT.data["renderer"] = f"not run: {why}"
        REPORT.save()
        print(f"\nRenderer skipped: {why}", flush=True)
        return
    check_renderer(run)


def unavailable() -> str | None:
    """Why the renderer cannot be imported in this image (``None``: it can): diffusers, transformers, and our
    predictor's import chain (the model store imports pydantic)."""
    import importlib

    for name in ("diffusers", "transformers"):
        try:
            importlib.import_module(name)
        except Exception as exc:  # ImportError, or a version clash raised while importing
            return f"{name} cannot be imported in this image ({type(exc).__name__}: {str(exc)[:160]})"
    try:
        from diffusers import ControlNetModel, StableDiffusionXLControlNetPipeline  # noqa: F401 (lazy imports)

        from deployments.render.predictor import RendererPredictor  # noqa: F401
    except Exception as exc:
        return f"the renderer cannot be imported in this image ({type(exc).__name__}: {str(exc)[:160]})"
    return None


def check_renderer(run: Run) -> None:
    import diffusers
    import transformers

    from deployments.common.weights import ModelStore, load_manifest
    from deployments.render.predictor import RendererOptions, RendererPredictor

    # quiet: every call warns about dtype casts, and the pipelines from_pipe makes per group show a progress bar
    # (the predictor turns it off on the base pipeline only): off for every pipeline that sets none of its own
    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    diffusers.DiffusionPipeline._progress_bar_config = {"disable": True}
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    shape = QUICK if run.quick else FULL
    real = not run.quick and _has_real_weights(run.models_dir)
    if real:
        root, manifest_path = run.models_dir, SHIPPED_MANIFEST
        weights = f"real: the generative entries of configs/models.yaml in {root}"
    else:
        start = time.perf_counter()
        root = run.tmp / "renderer-store"
        manifest_path = write_random_store(root, shape, run.device)
        run.release()
        architecture = "tiny SDXL-layout parts (--quick)" if run.quick else "the real SDXL base 1.0 architecture"
        weights = f"random fp16 weights of {architecture}, written in the official layout (not the released files)"
        print(f"\nRenderer: {weights}, written in {time.perf_counter() - start:.1f} s", flush=True)
    REPORT.data["renderer_weights"] = weights
    summary = REPORT.model(KEY)
    summary.update({"unit": "images/s", "weights": weights})
    REPORT.save()
    dtype = "float16" if run.cuda else "float32"
    label = f"{'real' if real else 'random'} weights, {dtype}, {run.device.type}"

    # cold start: the predictor made over a fresh store, to the first image (store check, from_pretrained, render)
    run.reset_peak()
    start = time.perf_counter()
    store = ModelStore(root, load_manifest(manifest_path))
    predictor = RendererPredictor(store, RendererOptions(device=run.device.type, dtype=dtype))
    (first,) = _render(predictor, _requests(shape, 1, shape.long_steps, ()))
    run.sync()
    cold_s = time.perf_counter() - start
    resident = _resident_mib(run)
    cache = "" if real else ", page cache warm: the files were just written"
    REPORT.table(
        f"Renderer cold start ({label}): RendererPredictor made → first image, {shape.size_px}², "
        f"{shape.long_steps} steps, batch 1{cache}",
        ["weights", "load ms (store check + from_pretrained)", "first render ms", "cold start ms", "resident MiB"],
        [
            [weights, first.timings_ms.get("load", math.nan), first.timings_ms.get("render", math.nan)]
            + [cold_s * 1000, resident]
        ],
    )
    summary.update({"load_ms": first.timings_ms.get("load", math.nan), "first_forward_ms": cold_s * 1000})
    summary["resident_mib"] = resident

    left = run.clock.left_s()
    plan = {"long": 0.12, "short": 0.06, (): 0.14, (OPENPOSE,): 0.16, (OPENPOSE, CANNY): 0.2}
    estimate = cold_s - first.timings_ms.get("load", 0.0) / 1000  # one 1-image render, warm-up costs included

    latency_rows = []
    eager_p50 = math.nan
    for steps, (kind, cap) in zip((shape.long_steps, shape.short_steps), zip(("long", "short"), shape.max_samples)):
        per_image = estimate * steps / shape.long_steps
        samples = cap if run.quick else max(3, min(cap, int(plan[kind] * left / max(per_image, 1e-3))))
        row, times = _latency(run, predictor, shape, steps, samples)
        latency_rows.append(row)
        if steps == shape.long_steps:
            eager_p50 = float(np.percentile(times, 50)) if times else math.nan
        summary[f"s_per_image_p50_{steps}_steps"] = row[3]
        summary[f"s_per_image_p95_{steps}_steps"] = row[4]
    REPORT.table(
        f"Renderer s/image at batch 1 ({label}): {shape.size_px}², scheduler as shipped (Euler), guidance {GUIDANCE}, "
        "through render (the short step count times an LCM/Lightning-like run; no LoRA loaded)",
        ["steps", "size", "samples", "p50 s", "p95 s", "mean s", "peak MiB", "note"],
        latency_rows,
    )

    sweep_steps = shape.short_steps
    per_image = estimate * sweep_steps / shape.long_steps
    for controlnets in CONTROLNET_SETS:
        deadline = run.clock.deadline(plan[controlnets] * left)
        rows, last = _sweep(run, predictor, shape, controlnets, sweep_steps, per_image, deadline)
        named = " + ".join(controlnets) or "no ControlNet"
        REPORT.table(
            f"Renderer images/s ({label}), {named}: {shape.size_px}², {sweep_steps} steps, one compatibility key, "
            f"one render call per batch ({shape.repeats} timed after a warm-up; peak memory includes the weights)",
            ["ControlNets", "batch", "pipeline batch", "s/call", "images/s", "s/image", "peak MiB", "note"],
            rows,
        )
        summary.setdefault("images_per_s", {})[named] = {row[1]: row[4] for row in rows if row[7].startswith("ok")}
        if last is not None:  # the next set's projections: this one's cost, and a ControlNet adds about half a UNet
            per_image = last * 1.5

    _compile_table(run, predictor, shape, label, eager_p50, summary)
    _editors_table(run, predictor, shape, label, summary)
    REPORT.save()
    del predictor
    gc.collect()
    run.release()


def _latency(run: Run, predictor: Any, shape: Shape, steps: int, samples: int) -> tuple[list, list[float]]:
    """``samples`` batch-1 renders at ``steps`` after one warm-up (the first at this step count)."""
    requests = _requests(shape, 1, steps, ())
    run.reset_peak()
    _render(predictor, requests)
    times = []
    for index in range(samples):
        start = time.perf_counter()
        _render(predictor, _requests(shape, 1, steps, (), seed=index + 1))
        run.sync()
        times.append(time.perf_counter() - start)
    p50, p95 = (float(v) for v in np.percentile(times, [50, 95]))
    row = [steps, f"{shape.size_px}²", len(times), p50, p95, float(np.mean(times)), run.peak_mib(), "ok"]
    return row, times


def _sweep(
    run: Run,
    predictor: Any,
    shape: Shape,
    controlnets: tuple[str, ...],
    steps: int,
    per_image_s: float,
    deadline: float,
) -> tuple[list[list], float | None]:
    """Each batch: a warm-up call (the first with these ControlNets also loads them: its load ms is noted), then
    ``repeats`` timed calls. Stops at an OOM, or when the next batch's projected time passes ``deadline`` (a quick
    run does every batch). Returns the rows and the last measured s/image."""
    rows: list[list] = []
    named = " + ".join(controlnets) or "—"
    last: float | None = None
    for batch in shape.batches:
        estimate = (last if last is not None else per_image_s) * batch * (1 + shape.repeats)
        if not run.quick and time.perf_counter() + estimate > deadline:
            rows.append([named, batch, math.nan, math.nan, math.nan, math.nan, math.nan, "skipped: time"])
            break
        run.reset_peak()
        try:
            warm = _render(predictor, _requests(shape, batch, steps, controlnets))
            load_ms = warm[0].timings_ms.get("load", 0.0)
            times = []
            for repeat in range(shape.repeats):
                start = time.perf_counter()
                rendered = _render(predictor, _requests(shape, batch, steps, controlnets, seed=100 * (repeat + 1)))
                run.sync()
                times.append(time.perf_counter() - start)
        except RuntimeError as exc:  # OOM (larger batches fail too), or a kernel's limit
            note = "OOM" if isinstance(exc, torch.cuda.OutOfMemoryError) else f"error: {str(exc)[:100]}"
            run.release()
            rows.append([named, batch, math.nan, math.nan, math.nan, math.nan, math.nan, note])
            REPORT.model(KEY).setdefault("failed_at_batch", {})[named] = note, batch
            break
        seconds = float(np.median(times))
        pipeline_batch = rendered[0].batch_size  # the requests that shared the one pipeline call
        note = "ok" if pipeline_batch == batch else f"split: {pipeline_batch} per call"
        if load_ms > 1000:
            note += f" (its warm-up loaded the ControlNets: {load_ms:.0f} ms)"
        rows.append([named, batch, pipeline_batch, seconds, batch / seconds, seconds / batch, run.peak_mib(), note])
        last = seconds / batch
    return rows, last


def _compile_table(run: Run, predictor: Any, shape: Shape, label: str, eager_p50: float, summary: dict) -> None:
    """``torch.compile`` of the UNet (inductor, default mode; ``--quick``: the eager backend, which traces with
    dynamo but generates no code) against the eager p50 at the long step count, batch 1. Last: the UNet stays
    compiled, and each new batch size or ControlNet call would compile again."""
    backend = "eager" if run.quick else "inductor"
    min_s = 0.0 if run.quick else 100.0  # a cold inductor compile of the SDXL UNet takes on the order of a minute
    header = ["UNet", "first call s (compile included)", "samples", "p50 s/image", "speed-up vs eager", "note"]
    rows: list[list] = [["eager", math.nan, "—", eager_p50, 1.0, "the s/image table's p50"]]
    title = (
        f"Renderer torch.compile ({label}): the UNet compiled in place by the bench (RendererOptions has no compile "
        f"switch), backend {backend}, default mode; batch 1, {shape.size_px}², {shape.long_steps} steps"
    )
    if run.clock.left_s() < min_s:
        rows.append([f"compiled ({backend})", math.nan, 0, math.nan, math.nan, "skipped: time"])
        REPORT.table(title, header, rows)
        return
    unet = predictor._bases[BASE].pipeline.unet  # shared by every from_pipe pipeline of the base
    start = time.perf_counter()
    try:
        unet.compile(backend=backend)
        _render(predictor, _requests(shape, 1, shape.long_steps, ()))
        run.sync()
    except Exception as exc:  # a compile failure is a finding for the table, not the end of the check
        traceback.print_exc()
        note = f"error: {type(exc).__name__}: {exc}"[:160]
        rows.append([f"compiled ({backend})", time.perf_counter() - start, 0, math.nan, math.nan, note])
        REPORT.table(title, header, rows)
        return
    first_s = time.perf_counter() - start
    samples = 1 if run.quick else 3
    times = []
    for index in range(samples):
        start = time.perf_counter()
        _render(predictor, _requests(shape, 1, shape.long_steps, (), seed=index + 1))
        run.sync()
        times.append(time.perf_counter() - start)
    p50 = float(np.median(times))
    rows.append([f"compiled ({backend})", first_s, samples, p50, eager_p50 / p50, "ok"])
    REPORT.table(title, header, rows)
    summary["compile"] = {"backend": backend, "first_call_s": first_s, "p50_s": p50, "speedup": eager_p50 / p50}


def _editors_table(run: Run, predictor: Any, shape: Shape, label: str, summary: dict) -> None:
    """The edit job's neural editors through ``render``: s/image at batch 1 (p50 of a few) and images/s at batch 4,
    one compatibility key. InstructPix2Pix always (random weights of its layout unless the real ones are there);
    FLUX.2 klein only with its real files."""
    rng = np.random.default_rng(1)
    editors = [(INSTRUCT, "instruct", 768 if shape is FULL else shape.size_px, (EDIT_STEPS,))]
    if shape is FULL and _has_files(run.models_dir, FLUX2):
        editors.append((FLUX2, "reference_edit", 1024, (4, EDIT_STEPS)))
    rows = []
    for model, kind, side, step_counts in editors:
        photo = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        for steps in step_counts:
            if run.clock.left_s() < 20:
                rows.append([model, side, steps, 1, math.nan, math.nan, math.nan, "skipped: budget"])
                continue

            def requests(batch: int, steps: int = steps, model: str = model, kind: str = kind, photo=photo):
                return _edit_requests(model, kind, photo, steps, batch)

            _render(predictor, requests(1))  # loads the model, warms the kernels
            run.reset_peak()
            times = []
            for _ in range(1 if run.quick else 3):
                start = time.perf_counter()
                _render(predictor, requests(1))
                run.sync()
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            _render(predictor, requests(4))
            run.sync()
            batch_s = time.perf_counter() - start
            p50 = float(np.percentile(times, 50))
            rows.append([model, side, steps, len(times), p50, 4 / batch_s, run.peak_mib(), "ok"])
            summary.setdefault("editors", {})[f"{model} {steps} steps"] = {
                "s_per_image": p50,
                "images_per_s_4": 4 / batch_s,
            }
    if shape is FULL and len(editors) == 1:
        rows.append([FLUX2, 1024, 4, 0, math.nan, math.nan, math.nan, "not run: its real files are not in models/"])
    REPORT.table(
        f"Neural editors ({label}) through render: s/image at batch 1, images/s at batch 4 (one call)",
        ["model", "side px", "steps", "samples", "p50 s/image", "images/s at 4", "peak MiB", "note"],
        rows,
    )


def _edit_requests(model: str, kind: str, photo: np.ndarray, steps: int, batch: int) -> list:
    """``batch`` edits of ``photo`` with one compatibility key: each its own prompt and seed."""
    from deployments.render.types import RenderRequest

    side = photo.shape[0]
    return [
        RenderRequest(
            PROMPTS[i % len(PROMPTS)],
            kind=kind,
            model=model,
            image=photo,
            width=side,
            height=side,
            steps=steps,
            guidance=GUIDANCE,
            seed=i,
        )
        for i in range(batch)
    ]


def _has_files(models_dir: Path, name: str) -> bool:
    from deployments.common.weights import ModelStore, load_manifest

    store = ModelStore(models_dir, load_manifest(SHIPPED_MANIFEST))
    return all(store.path_of(part).is_file() for part in store.manifest[name].parts)


def _render(predictor: Any, requests: list) -> list:
    with np.errstate(invalid="ignore"):  # random fp16 weights may give NaN pixels: the timing is the same
        return predictor.render(requests)


def _requests(shape: Shape, batch: int, steps: int, controlnets: tuple[str, ...], seed: int = 0) -> list:
    """``batch`` requests with one compatibility key: each its own prompt, seed and condition images."""
    from deployments.render.types import Condition, RenderRequest

    rng = np.random.default_rng(seed)
    size = shape.size_px
    requests = []
    for index in range(batch):
        conditions = tuple(
            Condition(name, rng.integers(0, 256, (size, size, 3), dtype=np.uint8), 0.8) for name in controlnets
        )
        requests.append(
            RenderRequest(
                prompt=PROMPTS[index % len(PROMPTS)],
                negative_prompt="blurry",
                width=size,
                height=size,
                steps=steps,
                guidance=GUIDANCE,
                seed=seed + index,
                conditions=conditions,
                model=BASE,
            )
        )
    return requests


def _resident_mib(run: Run) -> float:
    return torch.cuda.memory_allocated() / 2**20 if run.cuda else math.nan


def _has_real_weights(models_dir: Path) -> bool:
    """Every file of the entries this section runs is in ``models_dir`` (their hashes are checked by the store when
    the predictor loads them, inside the cold start)."""
    return all(_has_files(models_dir, name) for name in USED)


# -- random weights in the official layout --------------------------------------------------------------------------


def write_random_store(root: Path, shape: Shape, device: torch.device) -> Path:
    """Random fp16 SDXL base and ControlNet in the official repositories' layouts under the shipped entries' folders
    in ``root`` (the canny ControlNet: the openpose one's files, hard-linked), and a manifest of those entries with
    every file listed (its size; sha256 null, trust on first use, as configs/models.yaml has them). Built on
    ``device`` (an SDXL UNet's random init is seconds there, minutes on a CPU). Returns the manifest's path."""
    import yaml

    shipped = yaml.safe_load(SHIPPED_MANIFEST.read_text(encoding="utf-8"))["models"]
    folders = {name: root / shipped[name]["file"] for name in USED}
    _save_random_sdxl(folders[BASE], folders[OPENPOSE], folders[INSTRUCT], shape, device)
    _link_tree(folders[OPENPOSE], folders[CANNY])
    models = {}
    for name in USED:
        entry = dict(shipped[name])
        base = folders[name]
        entry["files"] = [
            {"path": path.relative_to(base).as_posix(), "sha256": None, "size_bytes": path.stat().st_size}
            for path in sorted(base.rglob("*"))
            if path.is_file()
        ]
        entry["description"] = f"random weights of {name}'s architecture (bench/gpu/renderer.py)"
        models[name] = entry
    manifest = root / "models.yaml"
    manifest.write_text(yaml.safe_dump({"models": models}, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return manifest


def _save_random_sdxl(
    base_dir: Path, controlnet_dir: Path, instruct_dir: Path, shape: Shape, device: torch.device
) -> None:
    """The base, its ControlNet, and the InstructPix2Pix editor (the base's text encoders and VAE, its own UNet that
    takes the start image's latents too: 8 input channels)."""
    from diffusers import (
        AutoencoderKL,
        ControlNetModel,
        EulerDiscreteScheduler,
        StableDiffusionXLInstructPix2PixPipeline,
        StableDiffusionXLPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer

    from tests.unit.render.tiny_sdxl import write_clip_vocab

    torch.manual_seed(0)
    scratch = base_dir.parent / (base_dir.name + "-vocab")
    vocab_file, merges_file = write_clip_vocab(scratch)
    tokenizers = [
        CLIPTokenizer(vocab_file=str(vocab_file), merges_file=str(merges_file), pad_token=pad, model_max_length=77)
        for pad in ("<|endoftext|>", "!")  # the official tokenizer's and tokenizer_2's padding
    ]
    with torch.device(device):  # the random init on the device; the files are fp16 as the official ones
        unet = UNet2DConditionModel.from_config(shape.unet).to(torch.float16)
        controlnet = ControlNetModel.from_unet(
            unet, conditioning_embedding_out_channels=shape.conditioning_channels, load_weights_from_unet=False
        ).to(torch.float16)
        controlnet.save_pretrained(controlnet_dir)
        del controlnet
        vae = AutoencoderKL.from_config(shape.vae).to(torch.float16)
        text_encoder = CLIPTextModel(CLIPTextConfig(**shape.text_encoder)).to(torch.float16)
        text_encoder_2 = CLIPTextModelWithProjection(CLIPTextConfig(**shape.text_encoder_2)).to(torch.float16)
    shared = {
        "vae": vae,
        "text_encoder": text_encoder,
        "text_encoder_2": text_encoder_2,
        "tokenizer": tokenizers[0],
        "tokenizer_2": tokenizers[1],
        "scheduler": EulerDiscreteScheduler.from_config(SDXL_SCHEDULER),
    }
    pipeline = StableDiffusionXLPipeline(unet=unet, **shared)
    pipeline.save_pretrained(base_dir, variant="fp16")
    del pipeline, unet
    gc.collect()
    with torch.device(device):
        editor_unet = UNet2DConditionModel.from_config({**shape.unet, "in_channels": 8}).to(torch.float16)
    editor = StableDiffusionXLInstructPix2PixPipeline(unet=editor_unet, **shared)
    editor.save_pretrained(instruct_dir)  # its repository has no fp16 variant: the files under their plain names
    del editor, editor_unet, vae, text_encoder, text_encoder_2, shared
    gc.collect()
    for folder in (base_dir, instruct_dir):
        for name in ("tokenizer", "tokenizer_2"):  # the official repository's files: vocab.json and merges.txt
            (folder / name / "tokenizer.json").unlink(missing_ok=True)
            for file in (vocab_file, merges_file):
                shutil.copy(file, folder / name / file.name)
    shutil.rmtree(scratch)


def _link_tree(source: Path, target: Path) -> None:
    for path in source.rglob("*"):
        if path.is_file():
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, destination)
            except OSError:
                shutil.copy2(path, destination)
