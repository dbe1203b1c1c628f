"""Records that cross between a job and the Renderer replicas (torch-free: the ingress unpickles them).

A ``RenderRequest`` is one image to generate. Requests whose ``compatibility_key()`` is equal share one pipeline call
(per-item prompts, seeds, condition and adapter images); everything that is pipeline-wide in diffusers (the kind of
pipeline, the size, steps, scheduler, guidance, strength, which ControlNets at which scales, the adapter's scale and
the LoRA set) is in the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from deployments.common.batching import ItemFailure, Progress
from deployments.common.engine import EngineInfo
from deployments.common.stage import StageCall

RenderKind = Literal["txt2img", "img2img", "inpaint", "instruct", "reference_edit"]
RENDER_KINDS: tuple[str, ...] = ("txt2img", "img2img", "inpaint", "instruct", "reference_edit")
DEFAULT_RENDER_MODEL = "sdxl-base-1.0"
MIN_SIDE_PX = 32
SIDE_MULTIPLE_PX = 8  # the VAE halves a side three times
# (smallest side, side multiple) in px of a kind whose model asks more than SDXL: FLUX.2's VAE shrinks a side 8× and
# its transformer packs 2×2 latents, and diffusers takes no reference image under 64 px a side
SIDE_GRIDS: dict[str, tuple[int, int]] = {"reference_edit": (64, 16)}
# LoRA sets a replica holds at once (Serve's multiplexer routes a set to the replica that holds it and evicts the least
# recently used one beyond this; the predictor keeps the same bound where there is no multiplexer).
LORA_SETS_PER_REPLICA = 4
# scheduler name -> (diffusers class, from_config overrides); "default" keeps the model's own.
SCHEDULERS: dict[str, tuple[str, dict[str, Any]]] = {
    "euler": ("EulerDiscreteScheduler", {}),
    "euler_a": ("EulerAncestralDiscreteScheduler", {}),
    "dpmpp_2m": ("DPMSolverMultistepScheduler", {}),
    "dpmpp_2m_karras": ("DPMSolverMultistepScheduler", {"use_karras_sigmas": True}),
    "ddim": ("DDIMScheduler", {}),
    "unipc": ("UniPCMultistepScheduler", {}),
}


@dataclass(frozen=True, eq=False)
class Condition:
    """A ControlNet's condition: ``controlnet`` names its manifest entry, ``image`` is HxWx3 uint8 RGB at the
    render's size (a pose skeleton, Canny edges), ``scale`` its ``controlnet_conditioning_scale``."""

    controlnet: str
    image: np.ndarray
    scale: float = 1.0


@dataclass(frozen=True, eq=False)
class RenderRequest:
    """One image to render. ``image`` is the start image of ``img2img``, ``inpaint``, ``instruct`` and
    ``reference_edit`` (HxWx3 uint8 RGB at the render's size), ``mask`` the region ``inpaint`` repaints (HxW uint8,
    255 = repaint). ``instruct`` edits ``image`` as ``prompt`` says (an InstructPix2Pix model: ``model`` names an
    ``image_editing`` entry), holding to it by ``image_guidance``; ``reference_edit`` draws anew as ``prompt`` says
    with ``image`` as its reference (FLUX.2 [klein]: no negative prompt, the model's own scheduler, sides on
    ``side_grid``). ``seed`` ``None``: the renderer draws one (and answers it). ``adapter_image``: the face whose
    likeness the IP-Adapter carries, at ``adapter_scale``. ``loras``: ``(manifest name, weight)`` pairs. The call is
    streamed: ``Progress`` (steps done) while it renders, then the ``Rendered``."""

    prompt: str
    kind: RenderKind = "txt2img"
    negative_prompt: str = ""
    width: int = 1024
    height: int = 1024
    steps: int = 30
    scheduler: str = "default"
    guidance: float = 5.0
    strength: float = 1.0
    image_guidance: float = 1.5
    seed: int | None = None
    image: np.ndarray | None = None
    mask: np.ndarray | None = None
    conditions: tuple[Condition, ...] = ()
    adapter_image: np.ndarray | None = None
    adapter_scale: float = 0.0
    loras: tuple[tuple[str, float], ...] = ()
    model: str = DEFAULT_RENDER_MODEL
    deadline_unix_s: float | None = None  # past it nobody waits: the render stops between steps

    def compatibility_key(self) -> tuple:
        """What must be equal for two requests to share one pipeline call."""
        return (
            self.model,
            self.kind,
            self.width,
            self.height,
            self.steps,
            self.scheduler,
            float(self.guidance),
            float(self.strength) if self.kind in ("img2img", "inpaint") else None,
            float(self.image_guidance) if self.kind == "instruct" else None,
            tuple((condition.controlnet, float(condition.scale)) for condition in self.conditions),
            float(self.adapter_scale) if self.adapter_image is not None else None,
            tuple((name, float(weight)) for name, weight in self.loras),
        )

    @property
    def steps_to_run(self) -> int:
        """The steps the pipeline runs: a start image is noised ``strength`` of the way, so img2img and inpaint run
        ``int(steps × strength)`` (diffusers' ``get_timesteps``)."""
        if self.kind in ("img2img", "inpaint"):
            return min(int(self.steps * self.strength), self.steps)
        return self.steps

    @property
    def lora_set(self) -> str:
        """The LoRAs to load, as Serve's multiplexed model id: ``<model>:<name>,<name>`` (sorted: the weights are
        set per call and cost nothing), ``""`` without LoRAs."""
        return f"{self.model}:{','.join(sorted(name for name, _ in self.loras))}" if self.loras else ""


def side_grid(kind: str) -> tuple[int, int]:
    """The smallest side and the multiple every side keeps (px) in a render of ``kind``."""
    return SIDE_GRIDS.get(kind, (MIN_SIDE_PX, SIDE_MULTIPLE_PX))


def lora_set_parts(lora_set: str) -> tuple[str, tuple[str, ...]]:
    """``RenderRequest.lora_set`` read back: the base model and the LoRAs' manifest names."""
    model, _, names = lora_set.partition(":")
    return model, tuple(name for name in names.split(",") if name)


@dataclass(frozen=True, eq=False)
class Rendered:
    """The rendered image (HxWx3 uint8 RGB), the seed it was drawn from, what it cost (``timings_ms``: ``load``,
    weights loaded for this call, and ``render``, the pipeline call), how many requests shared that call
    (``batch_size``) and every model it ran (``engines``: the base first, then its ControlNets, LoRAs and adapter)."""

    image: np.ndarray
    seed: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    batch_size: int = 1
    engines: tuple[EngineInfo, ...] = ()


def model_side_px(manifest: Mapping[str, Any], model: str, default_px: int) -> int:
    """The long side a job renders ``model`` at: its manifest entry's ``args.side_px`` (its training or native size),
    else ``default_px``."""
    spec = manifest.get(model)
    return int(spec.args.get("side_px", default_px)) if spec is not None else default_px


# what a render streams: its steps done, then its outcome
RenderAnswer = Progress | Rendered | ItemFailure
RENDERER = "Renderer"
RENDER: StageCall[RenderRequest, Rendered] = StageCall(RENDERER, "render", multiplexed_by="lora_set", streamed=True)
