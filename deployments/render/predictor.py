"""The renderer a ``Renderer`` replica holds: a diffusers SDXL pipeline (and its ControlNets, IP-Adapter and LoRAs)
and the editors (InstructPix2Pix on SDXL, FLUX.2 [klein]) loaded from the model store, never from a hub, on first use
and kept.

``render`` groups a batch by ``RenderRequest.compatibility_key()`` and runs one pipeline call per group, with
per-item prompts, start images, masks, condition images, adapter images and seeded generators: a request's image is
the same whether it ran alone or beside others (a ``torch.Generator`` per item draws its own latents). What diffusers
holds pipeline-wide (size, steps, scheduler, guidance, strength, ControlNet scales, the LoRA set) is in the key.

Without weights, a request is a 503 ``model_unavailable`` naming the command that fetches them. diffusers is
imported here only, when the first request loads a model: the ingress and ``types.py`` never import it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from deployments.common.batching import Progress
from deployments.common.engine import EngineInfo
from deployments.common.errors import InvalidParameter, ModelUnavailable, RequestTimeout
from deployments.common.timings import Timings
from deployments.common.torch_device import DeviceOptions, pick_device
from deployments.common.weights import ModelSpec, ModelStore, fix_command
from deployments.render.types import (
    LORA_SETS_PER_REPLICA,
    RENDER_KINDS,
    SCHEDULERS,
    Rendered,
    RenderRequest,
    lora_set_parts,
    side_grid,
)

logger = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 2000
GROUP = "generative"
TASKS = {
    "base": "image_generation",
    "editor": "image_editing",
    "reference editor": "image_editing",
    "controlnet": "controlnet",
    "adapter": "ip_adapter",
    "lora": "lora",
}
# the base model's role in each kind (the others: a generator); both editors are image_editing entries, told apart by
# their architecture (each loads as its own pipeline)
ROLES = {"instruct": "editor", "reference_edit": "reference editor"}
EDITOR_ARCHITECTURES = {"editor": "sdxl-instructpix2pix", "reference editor": "flux2-klein"}
MAX_REFERENCE_ASPECT = 8  # diffusers' Flux2ImageProcessor refuses a reference image more elongated
# (kind, with ControlNets) -> the diffusers pipeline class, and the name of its ControlNet image argument
PIPELINES: dict[tuple[str, bool], str] = {
    ("txt2img", False): "StableDiffusionXLPipeline",
    ("img2img", False): "StableDiffusionXLImg2ImgPipeline",
    ("inpaint", False): "StableDiffusionXLInpaintPipeline",
    ("txt2img", True): "StableDiffusionXLControlNetPipeline",
    ("img2img", True): "StableDiffusionXLControlNetImg2ImgPipeline",
    ("inpaint", True): "StableDiffusionXLControlNetInpaintPipeline",
    ("instruct", False): "StableDiffusionXLInstructPix2PixPipeline",
    ("reference_edit", False): "Flux2KleinPipeline",
}
# the class a base model of each role loads as (an editor's UNet takes the start image's latents too: 8 channels;
# FLUX.2 [klein]'s transformer reads the reference's latents beside the noise)
BASE_PIPELINES = {
    "base": "StableDiffusionXLPipeline",
    "editor": "StableDiffusionXLInstructPix2PixPipeline",
    "reference editor": "Flux2KleinPipeline",
}
OnProgress = Callable[[RenderRequest, Progress], None]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class RendererOptions(DeviceOptions):
    """``device``; ``dtype`` the weights run in (``float16`` on a GPU, ``float32`` on a CPU); the largest render
    (``max_megapixels``) and ``max_steps`` a request may ask; ``compile``: ``torch.compile`` each model's denoiser
    (UNet or transformer) as it loads (minutes of compiling per shape first, faster steps after: a GPU switch);
    ``vae_tiling_megapixels``: renders larger than this decode their latents tile by tile (the VAE's memory peak of
    a large Hires. fix output, at the cost of a little time)."""

    dtype: str = "float32"
    max_megapixels: float = 2.5
    max_steps: int = 80
    compile: bool = False
    vae_tiling_megapixels: float = 1.5

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise InvalidParameter(f"dtype must be one of {sorted(DTYPES)}, not {self.dtype!r}")


@dataclass
class _Loaded:
    pipeline: Any
    info: EngineInfo
    adapter: str | None = None


@dataclass(frozen=True)
class _LoraSet:
    """A loaded LoRA set: its base, and the peft adapter name each LoRA got in it (a set's own names, so dropping
    one set never touches another that shares a LoRA)."""

    model: str
    adapters: dict[str, str] = field(default_factory=dict)


class RendererPredictor:
    """``render`` runs one pipeline call per compatible group of a batch."""

    def __init__(self, store: ModelStore, options: RendererOptions = RendererOptions()) -> None:
        self.store = store
        self.options = options
        self.device = pick_device(options.device)
        self.dtype = DTYPES[options.dtype]
        self._bases: dict[str, _Loaded] = {}
        self._controlnets: dict[str, Any] = {}
        self._engines: dict[str, EngineInfo] = {}  # every model resolved so far: what a render names
        self._lora_sets: OrderedDict[str, _LoraSet] = OrderedDict()  # least recently used first
        self._lora_set_loads = 0
        # One render at a time: a pipeline's LoRA set, adapter scale and ControlNets are pipeline-wide (Serve runs one
        # batch at a time anyway; the in-process backend calls from several worker threads).
        self._lock = threading.Lock()

    # -- the stage's protocol -------------------------------------------------------------------------------------

    def admit(self, item: RenderRequest) -> None:
        """Refuse what the pipeline must not run: unknown models or kinds, sizes off the grid or too large, images
        of another size than the render's."""
        if item.kind not in RENDER_KINDS:
            raise InvalidParameter(f"kind must be one of {', '.join(RENDER_KINDS)}, not {item.kind!r}")
        self._entry(item.model, _role(item))
        if item.kind in ROLES and (item.conditions or item.adapter_image is not None or item.loras):
            raise InvalidParameter(f"an edit ({item.kind}) takes no ControlNet, adapter or LoRA")
        if item.kind == "instruct" and not 0.0 <= item.image_guidance <= 10.0:
            raise InvalidParameter("image_guidance is 0 to 10")
        if item.kind == "reference_edit" and (item.negative_prompt or item.scheduler != "default"):
            raise InvalidParameter("a reference_edit takes no negative prompt and runs the model's own scheduler")
        for condition in item.conditions:
            self._entry(condition.controlnet, "controlnet")
            self._image(condition.image, item, f"the {condition.controlnet} condition")
        for name, _ in item.loras:
            self._entry(name, "lora")
        if len({name for name, _ in item.loras}) != len(item.loras):
            raise InvalidParameter("a LoRA is named twice")
        min_side_px, multiple_px = side_grid(item.kind)
        for side in (item.width, item.height):
            if side < min_side_px or side % multiple_px:
                raise InvalidParameter(f"width and height are multiples of {multiple_px} from {min_side_px} px")
        long_px, short_px = max(item.width, item.height), min(item.width, item.height)
        if item.kind == "reference_edit" and long_px > MAX_REFERENCE_ASPECT * short_px:
            raise InvalidParameter(f"a reference_edit's long side is at most {MAX_REFERENCE_ASPECT}× its short side")
        if item.width * item.height > self.options.max_megapixels * 1e6:
            raise InvalidParameter(f"a render is at most {self.options.max_megapixels} megapixels")
        if not 1 <= item.steps <= self.options.max_steps:
            raise InvalidParameter(f"steps must be 1 to {self.options.max_steps}")
        if item.scheduler != "default" and item.scheduler not in SCHEDULERS:
            raise InvalidParameter(f"scheduler must be default or one of {', '.join(SCHEDULERS)}")
        if not 0.0 <= item.guidance <= 30.0 or not 0.0 < item.strength <= 1.0:
            raise InvalidParameter("guidance is 0 to 30, strength above 0 up to 1")
        if len(item.prompt) > MAX_PROMPT_CHARS or len(item.negative_prompt) > MAX_PROMPT_CHARS:
            raise InvalidParameter(f"a prompt is at most {MAX_PROMPT_CHARS} characters")
        if item.kind != "txt2img":
            self._image(item.image, item, f"the {item.kind} start image")
        if item.kind == "inpaint":
            if item.mask is None or item.mask.shape != (item.height, item.width) or item.mask.dtype != np.uint8:
                raise InvalidParameter(f"inpaint needs a {item.height}x{item.width} uint8 mask")
        if item.adapter_image is not None:
            self._adapter_spec()
            if item.adapter_image.ndim != 3 or item.adapter_image.shape[2] != 3:
                raise InvalidParameter("the adapter image is HxWx3 RGB")

    def probe(self) -> None:
        """Nothing to run: models load on first use (a replica without weights still answers the 503)."""

    def health(self) -> dict[str, Any]:
        """The loaded models' states; models not loaded yet are named, not hashed (gigabytes each)."""
        loaded = [self.store.status(name).to_json() for name in self._bases]
        manifest = self.store.manifest
        waiting = [name for name, spec in manifest.items() if spec.group == GROUP and name not in self._bases]
        return {
            "status": "ok",
            "engine": "diffusers-sdxl" if self._bases else "not-loaded",
            "models": loaded,
            "not_loaded": waiting,
            "lora_sets": list(self._lora_sets),
            "lora_set_loads": self._lora_set_loads,
        }

    def load_lora_set(self, lora_set: str) -> None:
        """Hold a LoRA set (``RenderRequest.lora_set``) ready for the renders that name it: Serve's multiplexer
        calls this once per set a replica takes on; a render also loads its set when it is not held."""
        with self._lock:
            self._lora_set(lora_set)

    def unload_lora_set(self, lora_set: str) -> None:
        """Drop a set's adapters (the multiplexer evicted it); a set not held is a no-op."""
        with self._lock:
            held = self._lora_sets.pop(lora_set, None)
            if held is not None:
                self._bases[held.model].pipeline.delete_adapters(list(held.adapters.values()))

    def render(self, requests: Sequence[RenderRequest], on_progress: OnProgress | None = None) -> list[Rendered]:
        """``on_progress(request, Progress)`` after each step of its pipeline call (from this thread). A group stops
        between steps once every one of its requests is past its ``deadline_unix_s`` (``RequestTimeout``)."""
        with self._lock:
            return self._render(requests, on_progress)

    def _render(self, requests: Sequence[RenderRequest], on_progress: OnProgress | None) -> list[Rendered]:
        _require_time_left(requests)
        groups: dict[tuple, list[int]] = {}
        for index, request in enumerate(requests):
            groups.setdefault(request.compatibility_key(), []).append(index)
        results: dict[int, Rendered] = {}
        for indices in groups.values():
            items = [requests[index] for index in indices]
            for index, rendered in zip(indices, self._render_group(items, on_progress)):
                results[index] = rendered
        return [results[index] for index in range(len(requests))]

    # -- one group: one pipeline call ------------------------------------------------------------------------------

    def _render_group(self, items: list[RenderRequest], on_progress: OnProgress | None) -> list[Rendered]:
        first = items[0]
        timings = Timings()
        with timings.phase("load"):
            loaded = self._base(first.model, _role(first))
            adapted = any(item.adapter_image is not None for item in items)
            if adapted:
                self.load_adapter(first.model)
            controlnets = [self._controlnet(condition.controlnet) for condition in first.conditions]
            self._apply_loras(loaded, first)
        pipeline = self._pipeline(loaded, first, controlnets)
        seeds = [item.seed if item.seed is not None else secrets.randbelow(2**31) for item in items]
        kwargs = self._arguments(pipeline, loaded, items, seeds)
        kwargs |= _on_steps(first.kind, first.steps, functools.partial(_moved, items, on_progress))
        with timings.phase("render"):
            images = self._call_pipeline(pipeline, kwargs)
        parts = [condition.controlnet for condition in first.conditions] + [name for name, _ in first.loras]
        parts += [loaded.adapter] if adapted and loaded.adapter else []
        engines = (loaded.info, *(self._engines[name] for name in parts))
        return [
            Rendered(_to_uint8(image), seed, dict(timings.ms), len(items), engines)
            for image, seed in zip(images, seeds)
        ]

    def _call_pipeline(self, pipeline: Any, kwargs: dict[str, Any]) -> np.ndarray:
        """The one diffusers call of a group: ``B×H×W×3`` float in [0, 1]."""
        with torch.inference_mode(), _embeds_as_given(pipeline, kwargs.get("ip_adapter_image_embeds")):
            return pipeline(**kwargs, output_type="np").images

    def _pipeline(self, loaded: _Loaded, first: RenderRequest, controlnets: list[Any]) -> Any:
        """The group's pipeline class over the base's modules (``from_pipe`` shares them: no copy, no load), with a
        fresh scheduler of the asked kind; a reference edit's gives each item its own reference."""
        import diffusers

        cls = getattr(diffusers, PIPELINES[first.kind, bool(controlnets)])
        base = loaded.pipeline
        extra: dict[str, Any] = {}
        if first.scheduler != "default":
            scheduler_name, overrides = SCHEDULERS[first.scheduler]
            extra["scheduler"] = getattr(diffusers, scheduler_name).from_config(base.scheduler.config, **overrides)
        else:
            extra["scheduler"] = type(base.scheduler).from_config(base.scheduler.config)
        if controlnets:
            extra["controlnet"] = controlnets[0] if len(controlnets) == 1 else controlnets
        pipeline = cls.from_pipe(base, dtype=base.dtype, **extra)  # without one, diffusers casts it all to float32
        pipeline.set_progress_bar_config(disable=True)  # a fresh pipeline per group: no bar in the replica's log
        vae = pipeline.vae  # shared by every group: tiling set for this one's size
        if first.width * first.height > self.options.vae_tiling_megapixels * 1e6:
            vae.enable_tiling()
        elif getattr(vae, "use_tiling", False):
            vae.disable_tiling()
        if first.kind == "reference_edit":
            pipeline.prepare_image_latents = functools.partial(_one_reference_each, pipeline.prepare_image_latents)
        return pipeline

    def _arguments(
        self, pipeline: Any, loaded: _Loaded, items: list[RenderRequest], seeds: list[int]
    ) -> dict[str, Any]:
        from PIL import Image

        first = items[0]
        kwargs: dict[str, Any] = {
            "prompt": [item.prompt for item in items],
            "num_inference_steps": first.steps,
            "guidance_scale": first.guidance,
            "generator": [torch.Generator("cpu").manual_seed(seed) for seed in seeds],
            "width": first.width,
            "height": first.height,
        }
        if first.kind != "reference_edit":  # FLUX.2 [klein] has no negative prompt
            kwargs["negative_prompt"] = [item.negative_prompt for item in items]
        if first.kind != "txt2img":
            kwargs["image"] = [Image.fromarray(item.image) for item in items]
        if first.kind == "instruct":
            kwargs["image_guidance_scale"] = first.image_guidance
        if first.kind in ("img2img", "inpaint"):
            kwargs["strength"] = first.strength
        if first.kind == "inpaint":
            kwargs["mask_image"] = [Image.fromarray(item.mask) for item in items]
        if first.conditions:
            count = len(first.conditions)
            per_net = [_condition_batch([item.conditions[i].image for item in items]) for i in range(count)]
            scales = [condition.scale for condition in first.conditions]
            single = len(per_net) == 1
            kwargs["image" if first.kind == "txt2img" else "control_image"] = per_net[0] if single else per_net
            kwargs["controlnet_conditioning_scale"] = scales[0] if single else scales
        if loaded.adapter is not None:
            kwargs["ip_adapter_image_embeds"] = self._adapter_embeds(pipeline, items)
        return kwargs

    def _adapter_embeds(self, pipeline: Any, items: list[RenderRequest]) -> list[torch.Tensor]:
        """One face per item: each item's image embedded alone, then stacked on the batch axis (diffusers' own
        ``ip_adapter_image`` would give every item all the faces). An item without a face gets a blank image at
        scale 0, which equals no adapter."""
        from PIL import Image

        scale = items[0].adapter_scale if items[0].adapter_image is not None else 0.0
        pipeline.set_ip_adapter_scale(scale)
        guided = items[0].guidance > 1.0
        negatives, positives = [], []
        for item in items:
            face = item.adapter_image if item.adapter_image is not None else np.zeros((224, 224, 3), np.uint8)
            (embeds,) = pipeline.prepare_ip_adapter_image_embeds([Image.fromarray(face)], None, self.device, 1, guided)
            if guided:
                negative, positive = embeds.chunk(2)
                negatives.append(negative)
                positives.append(positive)
            else:
                positives.append(embeds)
        return [torch.cat(negatives + positives)]

    # -- loading ----------------------------------------------------------------------------------------------------

    def _base(self, name: str, role: str = "base") -> _Loaded:
        if name not in self._bases:
            import diffusers

            spec = self._entry(name, role)
            path = self._resolve(spec)
            pipeline = getattr(diffusers, BASE_PIPELINES[role]).from_pretrained(
                path, local_files_only=True, dtype=self._dtype(spec), variant=spec.args.get("variant")
            )
            pipeline.set_progress_bar_config(disable=True)
            if self.device.type != "cpu":
                pipeline.to(self.device)
            if self.options.compile:
                _compile_denoiser(pipeline)
            self._bases[name] = _Loaded(pipeline, EngineInfo.from_weights(self.store.status(name)))
            logger.info("%s loaded on %s (%s)", name, self.device, pipeline.dtype)
        return self._bases[name]

    def _dtype(self, spec: ModelSpec) -> torch.dtype:
        """The replica's dtype; where it is a half precision, the one the model's manifest entry names, if any
        (``args.dtype``: FLUX.2 runs in bfloat16, whose range float16 lacks)."""
        if self.dtype == torch.float32:
            return self.dtype
        return DTYPES[spec.args.get("dtype", self.options.dtype)]

    def load_adapter(self, model: str) -> None:
        """Load the manifest's IP-Adapter into ``model``'s pipeline (a request with an adapter image does this)."""
        loaded = self._base(model)
        if loaded.adapter is None:
            spec = self._adapter_spec()
            path = self._resolve(spec)
            args = spec.args
            loaded.pipeline.load_ip_adapter(
                str(path),
                subfolder=args.get("subfolder", ""),
                weight_name=args["weight_name"],
                image_encoder_folder=args.get("image_encoder_folder", "image_encoder"),
                local_files_only=True,
                dtype=self.dtype,
            )
            if self.device.type != "cpu":
                loaded.pipeline.to(self.device)
            loaded.adapter = spec.name

    def _controlnet(self, name: str) -> Any:
        if name not in self._controlnets:
            import diffusers

            spec = self._entry(name, "controlnet")
            path = self._resolve(spec)
            model = diffusers.ControlNetModel.from_pretrained(
                path, local_files_only=True, dtype=self.dtype, variant=spec.args.get("variant")
            )
            self._controlnets[name] = model.to(self.device)
        return self._controlnets[name]

    def _apply_loras(self, loaded: _Loaded, first: RenderRequest) -> None:
        """LoRAs are pipeline-wide in diffusers (peft adapters on the shared modules): make exactly the group's set
        active, at its weights (none: every LoRA off)."""
        pipeline = loaded.pipeline
        if first.loras:
            held = self._lora_set(first.lora_set)
            pipeline.enable_lora()
            pipeline.set_adapters([held.adapters[name] for name, _ in first.loras], [w for _, w in first.loras])
        elif any(held.model == first.model for held in self._lora_sets.values()):
            pipeline.disable_lora()

    def _lora_set(self, lora_set: str) -> _LoraSet:
        """The set, loaded once and marked most recently used; beyond ``LORA_SETS_PER_REPLICA`` the least recently
        used one is dropped. A set that fails to load leaves nothing of itself behind."""
        if lora_set in self._lora_sets:
            self._lora_sets.move_to_end(lora_set)
            return self._lora_sets[lora_set]
        model, names = lora_set_parts(lora_set)
        pipeline = self._base(model).pipeline
        paths = [self._resolve(self._entry(name, "lora")) for name in names]
        while len(self._lora_sets) >= LORA_SETS_PER_REPLICA:
            _, evicted = self._lora_sets.popitem(last=False)
            self._bases[evicted.model].pipeline.delete_adapters(list(evicted.adapters.values()))
        self._lora_set_loads += 1
        held = _LoraSet(model, {name: f"set{self._lora_set_loads}_{i}" for i, name in enumerate(names)})
        try:
            for name, path in zip(names, paths):
                pipeline.load_lora_weights(str(path.parent), weight_name=path.name, adapter_name=held.adapters[name])
        except Exception:
            loaded_now = [a for a in held.adapters.values() if a in pipeline.get_list_adapters().get("unet", [])]
            if loaded_now:
                pipeline.delete_adapters(loaded_now)
            raise
        self._lora_sets[lora_set] = held
        logger.info("LoRA set %s loaded (%d held)", lora_set, len(self._lora_sets))
        return held

    def _resolve(self, spec: ModelSpec) -> Any:
        status = self.store.check(spec)
        if not status.usable:
            fix = fix_command([spec.name])
            hint = f" (or every generative model: portrait models pull --group {GROUP})" if spec.group else ""
            raise ModelUnavailable(
                f"the renderer's model {spec.name} is {status.state.value} in the model store; fetch it with: "
                f"{fix}{hint}",
                details={"missing_models": [spec.name], "fix": fix},
            )
        self._engines[spec.name] = EngineInfo.from_weights(status)
        return status.path

    def _entry(self, name: str, role: str) -> ModelSpec:
        spec = self.store.manifest.get(name)
        if spec is None or not _fits(spec, role):
            known = [key for key, value in self.store.manifest.items() if _fits(value, role)]
            raise InvalidParameter(f"unknown {role} model {name!r}; known: {', '.join(known) or 'none'}")
        return spec

    def _adapter_spec(self) -> ModelSpec:
        found = [spec for spec in self.store.manifest.values() if spec.task == TASKS["adapter"]]
        if not found:
            raise InvalidParameter("no IP-Adapter in the model manifest")
        return found[0]

    @staticmethod
    def _image(image: np.ndarray | None, item: RenderRequest, what: str) -> None:
        if image is None or image.shape != (item.height, item.width, 3) or image.dtype != np.uint8:
            raise InvalidParameter(f"{what} must be {item.height}x{item.width}x3 uint8 RGB")


def _on_steps(kind: str, steps: int, moved: Callable[[int, int], None]) -> dict[str, Any]:
    """The pipeline argument that calls ``moved(steps done, steps)`` after each step: diffusers'
    ``callback_on_step_end``, or the older ``callback`` of the InstructPix2Pix pipeline (which runs every step)."""
    if kind == "instruct":
        return {"callback": lambda step, timestep, latents: moved(step + 1, steps), "callback_steps": 1}

    def on_step_end(pipeline: Any, step: int, timestep: Any, tensors: dict[str, Any]) -> dict[str, Any]:
        moved(step + 1, pipeline.num_timesteps)
        return tensors

    return {"callback_on_step_end": on_step_end}


def _moved(items: Sequence[RenderRequest], on_progress: OnProgress | None, done: int, total: int) -> None:
    """After a step: each item told, and the call stopped once every item's deadline has passed (nobody waits)."""
    if on_progress is not None:
        for item in items:
            on_progress(item, Progress(done, total))
    _require_time_left(items)


def _require_time_left(items: Sequence[RenderRequest]) -> None:
    """``RequestTimeout`` when every item has a deadline and all of them have passed."""
    deadlines = [item.deadline_unix_s for item in items]
    if deadlines and all(deadline is not None for deadline in deadlines) and time.time() > max(deadlines):
        raise RequestTimeout("the render's deadline passed before it finished: nobody waits for it any more")


def _compile_denoiser(pipeline: Any) -> None:
    """``torch.compile`` the pipeline's denoiser in place (the UNet, or a FLUX transformer); the ControlNets, text
    encoders and VAE stay eager (each runs once or a few times a render)."""
    for name in ("unet", "transformer"):
        module = getattr(pipeline, name, None)
        if module is not None:
            setattr(pipeline, name, torch.compile(module))


def _role(item: RenderRequest) -> str:
    """Which kind of base model ``item.model`` must be: an editor of its kind's for an edit, a generator otherwise."""
    return ROLES.get(item.kind, "base")


def _fits(spec: ModelSpec, role: str) -> bool:
    """Whether ``spec`` is a model of ``role``: its task, and an editor's architecture."""
    return spec.task == TASKS[role] and spec.architecture == EDITOR_ARCHITECTURES.get(role, spec.architecture)


def _one_reference_each(
    prepare: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    images: list[torch.Tensor],
    batch_size: int,
    generator: Any,
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FLUX.2 [klein]'s ``prepare_image_latents`` for a batch of edits: diffusers gives every item all the images
    (several references for one picture), the renderer's items each edit their own photo, so item ``i`` gets image
    ``i`` alone (``batch_size`` is theirs: one image per item); the latents and their position ids are stacked on
    the batch axis."""
    each = [prepare(images=[image], batch_size=1, generator=generator, device=device, dtype=dtype) for image in images]
    return torch.cat([latents for latents, _ in each]), torch.cat([ids for _, ids in each])


def _condition_batch(images: Sequence[np.ndarray]) -> torch.Tensor:
    """One ControlNet's condition images as a ``B×3×H×W`` batch in [0, 1]: the form diffusers takes per item for
    several ControlNets too (a list per ControlNet is refused: "a single batch of multiple conditionings")."""
    return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float() / 255.0


@contextlib.contextmanager
def _embeds_as_given(pipeline: Any, embeds: list[torch.Tensor] | None) -> Iterator[None]:
    """diffusers repeats ``ip_adapter_image_embeds`` once per prompt (one face for the whole batch), so per-item
    embeds of a batch of B would reach each item as B faces; for this call the pipeline takes ours as they are."""
    if embeds is None:
        yield
        return
    pipeline.prepare_ip_adapter_image_embeds = lambda *args, **kwargs: embeds
    try:
        yield
    finally:
        del pipeline.prepare_ip_adapter_image_embeds


def _to_uint8(image: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray((np.clip(image, 0.0, 1.0) * 255.0).round().astype(np.uint8))
