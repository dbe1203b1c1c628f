"""DCT-Net's inference graph re-implemented in PyTorch, arithmetic for arithmetic.

The official DCT-Net styles ship as frozen TF1 graphs (``cartoon_h.pb`` for 288×288 aligned heads, ``cartoon_bg.pb``
for the whole image). Each graph is: ``x = in / 127.5 − 1`` → a small U-Net generator → a guided filter (r=1, eps read
from the graph) guided by ``x`` → clip to ±0.999999 → ``(o + 1) · 127.5`` → cast to uint8 (truncation). This module
rebuilds that function from the graph's 36 ``generator/...`` weight constants so the service needs no TensorFlow, and
reproduces TF's conventions that PyTorch does not share:

- ``SAME`` padding of the stride-2 convs is asymmetric (nothing top/left, one row/column bottom/right);
- ``ResizeBilinear`` with ``align_corners=False, half_pixel_centers=False`` ("legacy" TF): output pixel ``i`` samples
  input ``i · in/out``, clamped at the last row/column; neither PyTorch ``align_corners`` mode does this;
- the guided filter's box filter is a zero-padded 3×3 depthwise conv with weights 1/9, normalised by box(ones).

Channel order is the graph's own: **BGR** in, BGR out (unlike the service's RGB image contract; callers convert).
Height and width must be multiples of 4, as in the graph (two stride-2 convs, two ×2 upsamplings, then skip adds).
On CUDA, cuDNN's TF32 convolutions (PyTorch's default) cost fidelity to the float32 graph; callers that want the
official output set ``torch.backends.cudnn.allow_tf32 = False`` (a process-wide switch: the ``Cartoonizer`` replica,
which owns its process, does).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from deployments.cartoon.graphdef import GraphDef, read_graph
from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.image import require_image

logger = logging.getLogger(__name__)

GENERATOR_SCOPE = "generator"
LEAKY_SLOPE = 0.2
CLIP_LIMIT = 0.999999
SIZE_MULTIPLE_PX = 4
GUIDED_FILTER_RADIUS_PX = 1

# (TF layer name, input channels, output channels, kernel size, stride) in graph order; 1,467,075 parameters.
_LAYERS: tuple[tuple[str, int, int, int, int], ...] = (
    ("Conv", 3, 32, 7, 1),
    ("Conv_1", 32, 32, 3, 2),
    ("Conv_2", 32, 64, 3, 1),
    ("Conv_3", 64, 64, 3, 2),
    ("Conv_4", 64, 128, 3, 1),
    *((f"block_{index}/{conv}", 128, 128, 3, 1) for index in range(4) for conv in ("conv1", "conv2")),
    ("Conv_5", 128, 64, 3, 1),
    ("Conv_6", 64, 64, 3, 1),
    ("Conv_7", 64, 32, 3, 1),
    ("Conv_8", 32, 32, 3, 1),
    ("Conv_9", 32, 3, 7, 1),
)
_NUM_BLOCKS = 4


class TfSameConv2d(nn.Module):
    """A conv with TF ``SAME`` padding: extra padding goes bottom/right, which matters for stride 2."""

    def __init__(self, in_channels: int, out_channels: int, kernel_px: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        self.kernel_px = kernel_px
        self.weight = nn.Parameter(torch.zeros(out_channels, in_channels, kernel_px, kernel_px), requires_grad=False)
        self.bias = nn.Parameter(torch.zeros(out_channels), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:  # odd kernel, stride 1: TF's SAME is symmetric
            return F.conv2d(x, self.weight, self.bias, padding=self.kernel_px // 2)
        pad_h = _tf_same_padding(x.shape[-2], self.kernel_px, self.stride)
        pad_w = _tf_same_padding(x.shape[-1], self.kernel_px, self.stride)
        return F.conv2d(F.pad(x, (*pad_w, *pad_h)), self.weight, self.bias, stride=self.stride)


def _tf_same_padding(size_px: int, kernel_px: int, stride: int) -> tuple[int, int]:
    """(before, after) padding of TF ``SAME``: the odd pixel of padding goes after."""
    out_px = -(-size_px // stride)
    total = max((out_px - 1) * stride + kernel_px - size_px, 0)
    return total // 2, total - total // 2


def resize_bilinear_tf_legacy(x: torch.Tensor, out_h: int, out_w: int) -> torch.Tensor:
    """TF ``ResizeBilinear(align_corners=False, half_pixel_centers=False)`` on an N×C×H×W float tensor.

    Same float32 operations in the same order as TF's kernel: interpolate along width (top and bottom rows), then
    along height, each as ``a + (b − a) · lerp``.
    """
    lo_y, hi_y, lerp_y = _legacy_taps(x.shape[-2], out_h, x.device)
    lo_x, hi_x, lerp_x = _legacy_taps(x.shape[-1], out_w, x.device)
    left = x.index_select(-1, lo_x)
    rows = x.index_select(-1, hi_x).sub_(left).mul_(lerp_x).add_(left)
    del left  # full-resolution temporaries dominate peak memory at 720p batches
    top = rows.index_select(-2, lo_y)
    return rows.index_select(-2, hi_y).sub_(top).mul_(lerp_y[:, None]).add_(top)


def _legacy_taps(in_px: int, out_px: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Source indices and weights of legacy TF resizing: ``src = dst · (in/out)`` in float32, no half-pixel shift."""
    scale = np.float32(in_px / out_px)
    src = np.arange(out_px, dtype=np.float32) * scale
    lower = np.floor(src)
    upper = np.minimum(np.ceil(src), in_px - 1)
    lerp = (src - lower).astype(np.float32)
    return (
        torch.from_numpy(lower.astype(np.int64)).to(device),
        torch.from_numpy(upper.astype(np.int64)).to(device),
        torch.from_numpy(lerp).to(device),
    )


def box_filter(x: torch.Tensor, radius_px: int = GUIDED_FILTER_RADIUS_PX) -> torch.Tensor:
    """Zero-padded depthwise (2r+1)² conv with weights 1/(2r+1)², as the graph's ``DepthwiseConv2dNative``."""
    size = 2 * radius_px + 1
    channels = x.shape[1]
    weight = torch.full((channels, 1, size, size), 1.0 / size**2, dtype=x.dtype, device=x.device)
    return F.conv2d(x, weight, padding=radius_px, groups=channels)


def guided_filter(
    guide: torch.Tensor, src: torch.Tensor, eps: float, radius_px: int = GUIDED_FILTER_RADIUS_PX
) -> torch.Tensor:
    """He et al.'s guided filter per channel, in the graph's operation order: smooths ``src`` along ``guide``'s
    edges."""
    ones = torch.ones((1, 1, *guide.shape[-2:]), dtype=guide.dtype, device=guide.device)
    count = box_filter(ones, radius_px)
    mean_guide = box_filter(guide, radius_px) / count
    mean_src = box_filter(src, radius_px) / count
    cov = box_filter(guide * src, radius_px) / count - mean_guide * mean_src
    var = box_filter(guide * guide, radius_px) / count - mean_guide * mean_guide
    slope = cov / (var + torch.tensor(eps, dtype=guide.dtype))
    offset = mean_src - slope * mean_guide
    return (box_filter(slope, radius_px) / count) * guide + box_filter(offset, radius_px) / count


class DctNetGenerator(nn.Module):
    """The U-Net of DCT-Net: 32/64/128 channels, two stride-2 downs, 4 residual blocks, two legacy-bilinear ups."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleDict(
            {_module_key(name): TfSameConv2d(c_in, c_out, k, s) for name, c_in, c_out, k, s in _LAYERS}
        )

    def _conv(self, name: str, x: torch.Tensor, activate: bool = True) -> torch.Tensor:
        y = self.convs[_module_key(name)](x)
        return F.leaky_relu(y, LEAKY_SLOPE, inplace=True) if activate else y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip_full = self._conv("Conv", x)
        skip_half = self._conv("Conv_2", self._conv("Conv_1", skip_full))
        y = self._conv("Conv_4", self._conv("Conv_3", skip_half))
        for index in range(_NUM_BLOCKS):
            y = self._conv(f"block_{index}/conv2", self._conv(f"block_{index}/conv1", y), activate=False).add_(y)
        y = self._conv("Conv_5", y)
        y = resize_bilinear_tf_legacy(y, 2 * y.shape[-2], 2 * y.shape[-1]).add_(skip_half)
        y = self._conv("Conv_7", self._conv("Conv_6", y))
        y = resize_bilinear_tf_legacy(y, 2 * y.shape[-2], 2 * y.shape[-1]).add_(skip_full)
        return self._conv("Conv_9", self._conv("Conv_8", y), activate=False)


def _module_key(tf_name: str) -> str:
    """``nn.ModuleDict`` keys cannot contain dots; TF layer names have slashes: keep them readable."""
    return tf_name.replace("/", "__")


class DctNetGraph(nn.Module):
    """The whole frozen graph: scaling, generator, guided filter, clip, rescale and truncating cast."""

    def __init__(self, eps: float) -> None:
        super().__init__()
        self.generator = DctNetGenerator()
        self.eps = float(eps)

    def forward(self, images_bgr: torch.Tensor) -> torch.Tensor:
        x = images_bgr.contiguous(memory_format=torch.channels_last) / 127.5 - 1.0
        y = guided_filter(x, self.generator(x), self.eps)
        return ((y.clamp(-CLIP_LIMIT, CLIP_LIMIT) + 1.0) * 127.5).to(torch.uint8)


@dataclass(frozen=True)
class DctNet:
    """One DCT-Net style graph (head or whole-image), ready to run. Contract: BGR uint8 in, BGR uint8 out."""

    graph: DctNetGraph

    @property
    def device(self) -> torch.device:
        return next(self.graph.parameters()).device

    @property
    def eps(self) -> float:
        return self.graph.eps

    def to(self, device: torch.device | str) -> DctNet:
        """Move the weights (in place, like ``nn.Module.to``) and return ``self``."""
        self.graph.to(device)
        return self

    def __call__(self, image_bgr: np.ndarray) -> np.ndarray:
        """What the official graph returns for one HxWx3 uint8 BGR image (H, W multiples of 4)."""
        require_image(image_bgr, what="DCT-Net input (BGR)")
        _check_size(*image_bgr.shape[:2])
        batch = torch.from_numpy(np.ascontiguousarray(image_bgr)).permute(2, 0, 1)[None].to(self.device, torch.float32)
        return np.ascontiguousarray(self.forward_batch(batch)[0].permute(1, 2, 0).cpu().numpy())

    def forward_batch(self, images_bgr: torch.Tensor) -> torch.Tensor:
        """B×3×H×W float32 BGR 0..255 (on the model's device) → B×3×H×W uint8 BGR; each item equals its single call.

        The result is laid out channels-last (NHWC strides), so ``out.permute(0, 2, 3, 1)`` is already contiguous.
        """
        if images_bgr.ndim != 4 or images_bgr.shape[1] != 3 or images_bgr.dtype != torch.float32:
            raise InvalidParameter(
                f"DCT-Net expects a B×3×H×W float32 batch, got {tuple(images_bgr.shape)} {images_bgr.dtype}"
            )
        _check_size(*images_bgr.shape[-2:])
        with torch.inference_mode():
            return self.graph(images_bgr)


def _check_size(height_px: int, width_px: int) -> None:
    if height_px <= 0 or width_px <= 0 or height_px % SIZE_MULTIPLE_PX or width_px % SIZE_MULTIPLE_PX:
        raise InvalidParameter(
            f"DCT-Net needs height and width that are positive multiples of {SIZE_MULTIPLE_PX}, "
            f"got {height_px}x{width_px}"
        )


def official_weight_shapes() -> dict[str, tuple[int, ...]]:
    """Name → shape of the 36 weight constants of an official graph (kernels HWIO), e.g. to make test weights."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, c_in, c_out, kernel_px, _ in _LAYERS:
        shapes[f"{GENERATOR_SCOPE}/{name}/weights"] = (kernel_px, kernel_px, c_in, c_out)
        shapes[f"{GENERATOR_SCOPE}/{name}/biases"] = (c_out,)
    return shapes


def build_dctnet_from_constants(consts: Mapping[str, np.ndarray], eps: float) -> DctNet:
    """Build the graph from TF weight constants (``generator/<layer>/weights`` HWIO, ``.../biases``) and eps.

    Names are matched on their ``generator/...`` tail, so an export that prefixes the constants still loads.
    """
    graph = DctNetGraph(eps)
    for name, c_in, c_out, kernel_px, _ in _LAYERS:
        conv = graph.generator.convs[_module_key(name)]
        weights_hwio = _find_constant(consts, f"{GENERATOR_SCOPE}/{name}/weights", (kernel_px, kernel_px, c_in, c_out))
        biases = _find_constant(consts, f"{GENERATOR_SCOPE}/{name}/biases", (c_out,))
        conv.weight.copy_(torch.from_numpy(np.ascontiguousarray(weights_hwio.transpose(3, 2, 0, 1))))
        conv.bias.copy_(torch.from_numpy(biases))
    # NHWC is TF's layout too, and oneDNN's convs run about 1.6x faster on it than on NCHW here.
    return DctNet(graph.to(memory_format=torch.channels_last).eval())


def _find_constant(consts: Mapping[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    matches = [key for key in consts if key == name or key.endswith("/" + name)]
    if len(matches) != 1:
        problem = "missing" if not matches else f"ambiguous ({', '.join(sorted(matches))})"
        raise ModelUnavailable(f"DCT-Net weight {name} is {problem}")
    value = np.asarray(consts[matches[0]])
    if value.shape != shape or value.dtype != np.float32:
        raise ModelUnavailable(f"DCT-Net weight {name} has {value.shape} {value.dtype}, expected {shape} float32")
    return value


def read_guided_filter_eps(graph: GraphDef) -> float:
    """The guided filter's eps: the scalar Const added to the variance that divides the covariance.

    In the graph that is ``RealDiv(cov, AddV2(var, eps))``; read it rather than assume 1e-2, since styles may differ.
    """
    by_name = {node.name: node for node in graph.nodes}
    denominators = {
        node.inputs[1].split(":")[0] for node in graph.nodes if node.op == "RealDiv" and len(node.inputs) == 2
    }
    found: list[float] = []
    for name in denominators:
        node = by_name.get(name)
        if node is None or node.op not in ("Add", "AddV2"):
            continue
        for source in node.inputs:
            const = by_name.get(source.split(":")[0])
            value = const.attrs.get("value") if const is not None and const.op == "Const" else None
            if isinstance(value, np.ndarray) and value.size == 1 and value.dtype == np.float32:
                found.append(float(value.reshape(())))
    if len(found) != 1:
        raise ModelUnavailable(f"cannot find the guided filter's eps in the graph ({len(found)} candidates)")
    return found[0]


def load_dctnet(graph_path: str | Path) -> DctNet:
    """Load one official DCT-Net frozen graph (``cartoon_h.pb`` / ``cartoon_bg.pb``) onto the CPU."""
    graph = read_graph(graph_path)
    eps = read_guided_filter_eps(graph)
    model = build_dctnet_from_constants(graph.constants(), eps)
    n_params = sum(p.numel() for p in model.graph.parameters())
    logger.info("loaded DCT-Net graph %s: %d parameters, guided filter eps %g", graph_path, n_params, eps)
    return model
