"""dlib's face recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``, 128-D): a PyTorch port that reads
the official file directly, with no dlib, C++ tool or conversion step.

The network is ``anet_type`` of dlib's ``dnn_face_recognition_ex.cpp`` (and of the Python binding's
``face_recognition.cpp``), input to output::

    (pixel − mean) / 256            input_rgb_image_sized<150>: per-channel means read from the file
    con 7×7/2 (no padding) 32 → affine → relu → max_pool 3×3/2 (no padding)          150 → 72 → 35
    14 residual units: [con 3×3/s → affine → relu → con 3×3/1 → affine] + shortcut, relu
        32 ×3, 64 down + ×3, 128 down + ×2, 256 down + ×2, 256 down                   35 → 17 → 8 → 4 → 2
    mean over the 2×2 map → fc 256 → 128 without bias                                  the descriptor, not normalised

dlib's conventions that the port keeps:

- A strided ``con`` or pool has no padding (``_padding = stride != 1 ? 0 : size / 2``): the down units' first conv
  (3×3/2) shrinks 8 → 3 and 4 → 1 where the shortcut's 2×2/2 average pool gives 4 and 2.
- ``add_prev`` adds tensors of different shapes by zero-padding both to the larger one at the end of each axis
  (``cpu::add``): where a unit widens, the shortcut's missing channels are zeros, and the 4×4 (2×2) map keeps the
  shortcut alone on its last row and column. The port pads the same way, so these cells are not an approximation.
- ``affine`` is the per-channel scale and shift dlib made from the trained batch norms (``CONV_MODE``); it is folded
  into the convolution before it at load time (exact up to float rounding).
- The descriptor is the ``fc`` output as is: ``loss_metric`` only copies it, and the Python binding casts it to double.

On the official file the descriptors equal dlib 20's ``compute_face_descriptor`` within 5e-7 (tested at 1e-5).

The parser follows dlib's ``deserialize(net)``: the loss layer, then, as each layer writes its version, then its
sub-network, then its own details (tags and skips have none), every version from the outermost layer inwards, the
input layer, and each layer's details from the input outwards, followed by the training state ``add_layer`` keeps.
Integers are dlib's packed integers, floats and doubles its mantissa/exponent pairs, tensors raw little-endian
float32. Every layer is checked against the network above, so another file fails at the first byte that differs, with
its offset and what was expected there (layers numbered as dlib prints them: ``layer<0>`` is the loss).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from deployments.common.errors import InvalidParameter, ModelUnavailable
from deployments.common.image import require_image

if TYPE_CHECKING:
    import dlib

logger = logging.getLogger(__name__)

CHIP_SIZE_PX = 150
CHIP_PADDING = 0.25  # compute_face_descriptor's default: the chip the network was trained on
DESCRIPTOR_SIZE = 128
BATCH_SIZE = 16  # what the Python binding hands ``net(face_chips, 16)``

# (output channels, downsamples) of each residual unit, input to output: alevel4 .. alevel0.
RESIDUAL_UNITS: tuple[tuple[int, bool], ...] = (
    *((32, False),) * 3,
    (64, True),
    *((64, False),) * 3,
    (128, True),
    *((128, False),) * 2,
    (256, True),
    *((256, False),) * 2,
    (256, True),
)
STEM_CHANNELS = 32
_CONV_MODE = 0  # dlib's layer_mode: affine from bn_con (per channel)
_FC_NO_BIAS = 1  # dlib's fc_bias_mode
_FLOAT_SPECIALS = {32000: math.inf, 32001: -math.inf, 32002: math.nan}  # float_details' is_inf, is_ninf, is_nan


class DlibFileError(ValueError):
    """The bytes at ``offset`` are not what dlib writes for this network."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(f"at byte {offset}: {message}")
        self.offset = offset


# -- the network --------------------------------------------------------------------------------------------------


def add_zero_padded(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a + b`` as dlib's ``add_prev`` computes it: both zero-padded at the end of each axis to the larger shape."""
    if a.shape == b.shape:
        return a + b
    target = [max(m, n) for m, n in zip(a.shape[1:], b.shape[1:], strict=True)]

    def pad(t: torch.Tensor) -> torch.Tensor:
        (c, h, w), (tc, th, tw) = t.shape[1:], target
        return F.pad(t, (0, tw - w, 0, th - h, 0, tc - c))

    return pad(a) + pad(b)


class ResidualUnit(nn.Module):
    """dlib's ``ares`` (``ares_down`` when ``down``), with each ``affine`` folded into the conv before it."""

    def __init__(self, in_channels: int, out_channels: int, down: bool) -> None:
        super().__init__()
        self.down = down
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, 2 if down else 1, 0 if down else 1)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(F.relu(self.conv1(x)))
        shortcut = F.avg_pool2d(x, 2) if self.down else x
        return F.relu(add_zero_padded(y, shortcut))


class DlibFaceResNet(nn.Module):
    """150×150 RGB chips, float pixels in [0, 255], ``(N, 3, 150, 150)`` → ``(N, 128)`` descriptors."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean_rgb", torch.zeros(1, 3, 1, 1))
        self.stem = nn.Conv2d(3, STEM_CHANNELS, 7, 2, 0)
        units, channels = [], STEM_CHANNELS
        for out_channels, down in RESIDUAL_UNITS:
            units.append(ResidualUnit(channels, out_channels, down))
            channels = out_channels
        self.units = nn.Sequential(*units)
        self.fc = nn.Linear(channels, DESCRIPTOR_SIZE, bias=False)

    def forward(self, chips: torch.Tensor) -> torch.Tensor:
        x = (chips - self.mean_rgb) / 256.0
        x = F.max_pool2d(F.relu(self.stem(x)), 3, 2)
        x = self.units(x)
        return self.fc(x.mean(dim=(2, 3)))


def load_dlib_resnet(path: str | Path) -> DlibFaceResNet:
    """The port with the weights of dlib's ``.dat``, in eval mode, float32, channels-last (oneDNN's convolutions: a
    third less CPU per chip than the default layout's at the batch sizes a judge sees); ``ModelUnavailable`` (naming
    the byte offset and what dlib would have read there) when the file is not this network."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ModelUnavailable(f"cannot read dlib model {path}: {exc}") from exc
    try:
        state = read_dlib_resnet(data)
    except DlibFileError as exc:
        raise ModelUnavailable(f"{path} is not dlib's face recognition ResNet v1: {exc}") from exc
    model = DlibFaceResNet()
    model.load_state_dict({name: torch.from_numpy(array) for name, array in state.items()}, strict=True)
    return model.eval().to(memory_format=torch.channels_last)


@torch.inference_mode()
def descriptors(model: DlibFaceResNet, chips: np.ndarray, *, batch_size: int = BATCH_SIZE) -> np.ndarray:
    """``(N, 150, 150, 3)`` uint8 RGB chips (``face_chips``) → ``(N, 128)`` float32 descriptors, ``batch_size`` at a
    time; dlib's ``compute_face_descriptor`` on the same chips, within float rounding."""
    chips = np.asarray(chips)
    if chips.ndim != 4 or chips.shape[1:] != (CHIP_SIZE_PX, CHIP_SIZE_PX, 3) or chips.dtype != np.uint8:
        raise InvalidParameter(
            f"face chips must be (N, {CHIP_SIZE_PX}, {CHIP_SIZE_PX}, 3) uint8 RGB, got {chips.shape} {chips.dtype}"
        )
    if batch_size < 1:
        raise InvalidParameter(f"batch_size must be at least 1, got {batch_size}")
    device = model.mean_rgb.device
    out = np.empty((len(chips), DESCRIPTOR_SIZE), np.float32)
    for start in range(0, len(chips), batch_size):
        # a copy: views (flipped, read-only) are fine, and the float conversion runs on the device
        batch = torch.from_numpy(np.array(chips[start : start + batch_size])).to(device).permute(0, 3, 1, 2).float()
        batch = batch.contiguous(memory_format=torch.channels_last)
        out[start : start + len(batch)] = model(batch).float().cpu().numpy()
    return out


def face_chips(image_rgb: np.ndarray, shapes: Sequence[dlib.full_object_detection]) -> np.ndarray:
    """The 150² chips dlib's ``compute_face_descriptor`` reads (``get_face_chip_details(shape, 150, 0.25)``, then
    ``extract_image_chips``), ``(N, 150, 150, 3)`` uint8 RGB, from ``(h, w, 3)`` uint8 RGB and 5- or 68-point shapes.
    dlib cuts them: its chip is fast, and bilinear sampling of our own would shift the descriptor."""
    import dlib

    require_image(image_rgb, what="photo to cut face chips from")
    if not shapes:
        return np.zeros((0, CHIP_SIZE_PX, CHIP_SIZE_PX, 3), np.uint8)
    detections = dlib.full_object_detections()
    detections.extend(shapes)
    chips = dlib.get_face_chips(np.ascontiguousarray(image_rgb), detections, CHIP_SIZE_PX, CHIP_PADDING)
    return np.stack(chips).astype(np.uint8, copy=False)


# -- dlib's serialisation -----------------------------------------------------------------------------------------


class DlibStream:
    """dlib's ``serialize.h`` primitives over the bytes of a file, each read naming what it expects."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.offset = 0

    def fail(self, message: str, offset: int | None = None) -> DlibFileError:
        return DlibFileError(self.offset if offset is None else offset, message)

    def take(self, size: int, what: str) -> bytes:
        if self.offset + size > len(self.data):
            raise self.fail(f"expected {what} ({size} B), but the file ends at byte {len(self.data)}: truncated?")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk

    def int_(self, what: str) -> int:
        """A packed integer: a control byte (bit 7 the sign, bits 0-3 the byte count), then little-endian bytes."""
        start = self.offset
        control = self.take(1, what)[0]
        size = control & 0x0F
        if control & 0x70 or not 1 <= size <= 8:
            raise self.fail(f"expected {what} (a dlib packed integer), found control byte 0x{control:02x}", start)
        value = int.from_bytes(self.take(size, what), "little")
        return -value if control & 0x80 else value

    def expect_int(self, expected: int, what: str) -> None:
        start = self.offset
        value = self.int_(what)
        if value != expected:
            raise self.fail(f"expected {what} {expected}, found {value}", start)

    def float_(self, what: str) -> float:
        """A float or double: ``float_details``' mantissa (int64) and exponent (int16)."""
        start = self.offset
        if self.offset < len(self.data) and self.data[self.offset] & 0x70:
            raise self.fail(f"expected {what} (a dlib binary float); dlib's old text floats are not read here", start)
        mantissa, exponent = self.int_(f"{what} (mantissa)"), self.int_(f"{what} (exponent)")
        if exponent in _FLOAT_SPECIALS:
            return _FLOAT_SPECIALS[exponent]
        return math.ldexp(mantissa, exponent)

    def bool_(self, what: str) -> bool:
        start = self.offset
        char = self.take(1, what)
        if char not in (b"0", b"1"):
            raise self.fail(f"expected {what} (a bool: '0' or '1'), found byte 0x{char[0]:02x}", start)
        return char == b"1"

    def string(self, what: str) -> str:
        start = self.offset
        size = self.int_(f"{what} (length)")
        if size < 0 or size > 256:
            raise self.fail(f"expected {what}, a short string, found a length of {size}", start)
        return self.take(size, what).decode("latin-1")

    def version(self, expected: Sequence[str], what: str) -> str:
        """A layer's version string, one of ``expected``."""
        start = self.offset
        found = self.string(f"{what}'s version")
        if found not in expected:
            raise self.fail(f"expected {what}'s version {' or '.join(map(repr, expected))}, found {found!r}", start)
        return found

    def tensor(self, what: str) -> np.ndarray:
        """A ``resizable_tensor``: version 2, four dimensions, raw little-endian float32."""
        self.expect_int(2, f"{what}: tensor version")
        shape = tuple(self.int_(f"{what}: tensor dimension") for _ in range(4))
        if min(shape) < 0:
            raise self.fail(f"expected {what}: tensor dimensions, found {shape}")
        count = math.prod(shape)
        return np.frombuffer(self.take(4 * count, f"{what}: {count} floats"), "<f4").reshape(shape).astype(np.float32)

    def alias_tensor(self, what: str) -> tuple[int, ...]:
        """An ``alias_tensor``: version 1 and four dimensions (a view into the layer's parameters)."""
        self.expect_int(1, f"{what}: alias tensor version")
        return tuple(self.int_(f"{what}: alias tensor dimension") for _ in range(4))


@dataclass(frozen=True)
class _Layer:
    """One layer of the expected network: ``kind`` and what dlib's template fixes for it."""

    kind: str  # con, affine, relu, max_pool, avg_pool, add_prev, fc, tag, skip
    channels: int = 0
    size: int = 0
    stride: int = 1

    @property
    def wrapper(self) -> bool:
        return self.kind in ("tag", "skip")


def expected_layers() -> list[_Layer]:
    """The network's layers as dlib nests them, outermost (under the loss) first."""
    layers = [_Layer("fc", DESCRIPTOR_SIZE), _Layer("avg_pool")]  # avg_pool_everything: size 0, stride 1
    for channels, down in reversed(RESIDUAL_UNITS):
        layers += [_Layer("relu"), _Layer("add_prev")]
        if down:
            layers += [_Layer("avg_pool", size=2, stride=2), _Layer("skip"), _Layer("tag")]
        layers += [
            _Layer("affine", channels),
            _Layer("con", channels, 3),
            _Layer("relu"),
            _Layer("affine", channels),
            _Layer("con", channels, 3, 2 if down else 1),
            _Layer("tag"),
        ]
    layers += [
        _Layer("max_pool", size=3, stride=2),
        _Layer("relu"),
        _Layer("affine", STEM_CHANNELS),
        _Layer("con", STEM_CHANNELS, 7, 2),
    ]
    return layers


_WINDOW = ("nr", "nc", "stride_y", "stride_x", "padding_y", "padding_x")


def _padding(size: int, stride: int) -> int:
    """dlib's default padding for con_, max_pool_ and avg_pool_: none when strided."""
    return 0 if stride != 1 else size // 2


def _read_window(stream: DlibStream, layer: _Layer, what: str) -> None:
    """nr, nc, stride_y, stride_x, padding_y, padding_x: checked against the template."""
    size, stride, padding = layer.size, layer.stride, _padding(layer.size, layer.stride)
    for name, expected in zip(_WINDOW, (size, size, stride, stride, padding, padding), strict=True):
        stream.expect_int(expected, f"{what} {name}")


def _read_con(stream: DlibStream, layer: _Layer, in_channels: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    version = stream.version(("con_4", "con_5", "con_6"), what)
    start = stream.offset
    params = stream.tensor(f"{what} params").ravel()
    stream.expect_int(layer.channels, f"{what} num_filters")
    _read_window(stream, layer, what)
    filters_shape = (layer.channels, in_channels, layer.size, layer.size)
    for name, expected in (("filters", filters_shape), ("biases", (1, layer.channels, 1, 1))):
        at = stream.offset
        found = stream.alias_tensor(f"{what} {name}")
        if found != expected:
            raise stream.fail(f"expected {what} {name} of shape {expected}, found {found}", at)
    for name in ("learning_rate", "weight_decay", "bias_learning_rate", "bias_weight_decay"):
        stream.float_(f"{what} {name} multiplier")
    use_bias = stream.bool_(f"{what} use_bias") if version != "con_4" else True
    if version == "con_6" and stream.bool_(f"{what} use_relu"):
        raise stream.fail(f"{what} has a fused relu, which this network does not have", stream.offset - 1)
    weight_count = math.prod(filters_shape)
    expected_count = weight_count + (layer.channels if use_bias else 0)
    if params.size != expected_count:
        raise stream.fail(f"expected {what} params of {expected_count} floats, found {params.size}", start)
    bias = params[weight_count:] if use_bias else np.zeros(layer.channels, np.float32)
    return params[:weight_count].reshape(filters_shape), bias


def _read_affine(stream: DlibStream, layer: _Layer, what: str) -> tuple[np.ndarray, np.ndarray]:
    """gamma and beta; a ``bn_con2`` here (dlib converts it on load) is refused: the official file holds affine."""
    version = stream.version(("affine_", "affine_2"), what)
    start = stream.offset
    params = stream.tensor(f"{what} params").ravel()
    for name in ("gamma", "beta"):
        at = stream.offset
        found = stream.alias_tensor(f"{what} {name}")
        if found != (1, layer.channels, 1, 1):
            raise stream.fail(f"expected {what} {name} of shape (1, {layer.channels}, 1, 1), found {found}", at)
    stream.expect_int(_CONV_MODE, f"{what} mode (CONV_MODE)")
    if version == "affine_2" and stream.bool_(f"{what} disabled"):
        raise stream.fail(f"{what} is disabled, which this network's affine layers never are", stream.offset - 1)
    if params.size != 2 * layer.channels:
        raise stream.fail(f"expected {what} params of {2 * layer.channels} floats, found {params.size}", start)
    return params[: layer.channels], params[layer.channels :]


def _read_fc(stream: DlibStream, layer: _Layer, in_features: int, what: str) -> np.ndarray:
    version = stream.version(("fc_2", "fc_3"), what)
    stream.expect_int(layer.channels, f"{what} num_outputs")
    stream.expect_int(in_features, f"{what} num_inputs")
    start = stream.offset
    params = stream.tensor(f"{what} params")
    if params.size != in_features * layer.channels:
        raise stream.fail(
            f"expected {what} params of {in_features}×{layer.channels} floats, found {params.shape}", start
        )
    at = stream.offset
    found = stream.alias_tensor(f"{what} weights")
    if found != (in_features, layer.channels, 1, 1):
        raise stream.fail(
            f"expected {what} weights of shape ({in_features}, {layer.channels}, 1, 1), found {found}", at
        )
    stream.alias_tensor(f"{what} biases")  # never set without a bias
    stream.expect_int(_FC_NO_BIAS, f"{what} bias mode (FC_NO_BIAS)")
    for name in ("learning_rate", "weight_decay", "bias_learning_rate", "bias_weight_decay"):
        stream.float_(f"{what} {name} multiplier")
    if version == "fc_3":
        stream.bool_(f"{what} use_bias")  # without effect in FC_NO_BIAS mode
    return params.reshape(in_features, layer.channels).T.copy()  # dlib computes x · W, torch x · Wᵀ


def _read_details(stream: DlibStream, layer: _Layer, what: str) -> None:
    """The layers without weights: their versions and template parameters."""
    if layer.kind == "relu":
        if stream.version(("relu_", "relu_2"), what) == "relu_2" and stream.bool_(f"{what} disabled"):
            raise stream.fail(f"{what} is disabled, which this network's relus never are", stream.offset - 1)
    elif layer.kind == "add_prev":
        stream.version(("add_prev_",), what)
    elif layer.kind in ("max_pool", "avg_pool"):
        stream.version((f"{layer.kind}_2",), what)
        _read_window(stream, layer, what)


def _read_input(stream: DlibStream) -> np.ndarray:
    stream.version(("input_rgb_image_sized",), "the input layer")
    mean_rgb = [stream.float_(f"the input layer's average {colour}") for colour in ("red", "green", "blue")]
    stream.expect_int(CHIP_SIZE_PX, "the input layer's rows")
    stream.expect_int(CHIP_SIZE_PX, "the input layer's columns")
    return np.asarray(mean_rgb, np.float32).reshape(1, 3, 1, 1)


def _read_training_state(stream: DlibStream, version: int, innermost: bool, what: str) -> None:
    """What ``add_layer`` writes after its layer: three flags and the tensors training left (empty when cleaned)."""
    for name in ("this_layer_setup_called", "gradient_input_is_stale", "get_output_and_gradient_input_disabled"):
        stream.bool_(f"{what} {name}")
    stream.tensor(f"{what} x_grad")
    stream.tensor(f"{what} cached_output")
    if innermost:
        stream.tensor(f"{what} grad_final")
        if version >= 3:
            stream.int_(f"{what} sample_expansion_factor")
    elif version >= 2:
        stream.tensor(f"{what} params_grad")


def _layer_name(depth: int, layer: _Layer) -> str:
    """As dlib prints the network: ``layer<0>`` is the loss."""
    return f"layer<{depth + 1}> ({layer.kind})"


def read_dlib_resnet(data: bytes) -> dict[str, np.ndarray]:
    """The state dict of :class:`DlibFaceResNet` from the bytes of ``dlib_face_recognition_resnet_model_v1.dat``,
    with each ``affine`` folded into its conv; ``DlibFileError`` where the bytes are not this network."""
    stream = DlibStream(data)
    stream.expect_int(1, "add_loss_layer version")
    if stream.version(("loss_metric_", "loss_metric_2"), "the loss layer") == "loss_metric_2":
        stream.float_("loss_metric margin")
        stream.float_("loss_metric distance threshold")

    layers = expected_layers()
    versions = []
    for depth, layer in enumerate(layers):
        what = _layer_name(depth, layer)
        start = stream.offset
        version = stream.int_(f"{what}: version")
        innermost = depth == len(layers) - 1
        allowed = (1,) if layer.wrapper else (2, 3) if innermost else (1, 2)
        if version not in allowed:
            raise stream.fail(f"expected {what}: version {' or '.join(map(str, allowed))}, found {version}", start)
        versions.append(version)

    state: dict[str, np.ndarray] = {"mean_rgb": _read_input(stream)}
    convs: list[tuple[np.ndarray, np.ndarray]] = []
    in_channels = 3
    for depth in reversed(range(len(layers))):
        layer, what = layers[depth], _layer_name(depth, layers[depth])
        if layer.wrapper:
            continue
        if layer.kind == "con":
            convs.append(_read_con(stream, layer, in_channels, what))
        elif layer.kind == "affine":
            gamma, beta = _read_affine(stream, layer, what)
            weight, bias = convs[-1]
            convs[-1] = (weight * gamma[:, None, None, None], bias * gamma + beta)
            in_channels = layer.channels
        elif layer.kind == "fc":
            state["fc.weight"] = _read_fc(stream, layer, in_channels, what)
        else:
            _read_details(stream, layer, what)
        _read_training_state(stream, versions[depth], depth == len(layers) - 1, what)
    if stream.offset != len(data):
        raise stream.fail(f"expected the end of the network, found {len(data) - stream.offset} more bytes")

    names = ["stem"] + [f"units.{i}.conv{j}" for i in range(len(RESIDUAL_UNITS)) for j in (1, 2)]
    for name, (weight, bias) in zip(names, convs, strict=True):
        state[f"{name}.weight"], state[f"{name}.bias"] = weight.astype(np.float32), bias.astype(np.float32)
    logger.debug("read dlib's face ResNet: %d convolutions, %d bytes", len(convs), len(data))
    return state
