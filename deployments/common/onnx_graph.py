"""Read an ONNX model's graph and weights without the onnx package: a PyTorch port only needs its initializers.

Follows ``onnx/onnx.proto``: ``ModelProto.graph`` → ``GraphProto`` (``node``, ``initializer``) → ``NodeProto``
(``op_type``, ``input``, ``output``) and ``TensorProto`` (``dims``, ``data_type``, ``raw_data`` or the typed fields).
Node attributes are not kept: the port defines the computation, the file only supplies the numbers and their order.
Anything that is not an ONNX model, or keeps its weights in external files, raises
:class:`~deployments.common.errors.ModelUnavailable`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np

from deployments.common.errors import ModelUnavailable
from deployments.common.protowire import (
    WireError,
    as_bytes,
    as_int,
    as_str,
    iter_fields,
    repeated_fixed,
    repeated_varints,
)

logger = logging.getLogger(__name__)

# TensorProto.DataType values that decode to numpy.
_NUMPY_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),  # FLOAT
    2: np.dtype("u1"),  # UINT8
    3: np.dtype("i1"),  # INT8
    5: np.dtype("<i2"),  # INT16
    6: np.dtype("<i4"),  # INT32
    7: np.dtype("<i8"),  # INT64
    9: np.dtype("?"),  # BOOL
    10: np.dtype("<f2"),  # FLOAT16
    11: np.dtype("<f8"),  # DOUBLE
}
_DATA_LOCATION_EXTERNAL = 1


@dataclass(frozen=True)
class OnnxNode:
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    name: str = ""


@dataclass(frozen=True)
class OnnxGraph:
    """The graph's nodes in file (topological) order and its initializers by name."""

    nodes: tuple[OnnxNode, ...]
    initializers: Mapping[str, np.ndarray]

    def initializer_inputs(self, op_type: str) -> list[tuple[str, ...]]:
        """For each ``op_type`` node in order, the names of its inputs that are initializers (a Conv's weight, bias)."""
        return [
            tuple(name for name in node.inputs if name in self.initializers)
            for node in self.nodes
            if node.op_type == op_type
        ]


def _parse_tensor(buf: bytes) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    data_type = 0
    name = ""
    raw: bytes | None = None
    floats: list[bytes] = []
    doubles: list[bytes] = []
    ints: list[int] = []
    for field, wire, value in iter_fields(buf):
        if field == 1:
            dims.extend(repeated_varints(wire, value))
        elif field == 2:
            data_type = as_int(wire, value)
        elif field == 4:
            floats.append(repeated_fixed(wire, value, "<f"))
        elif field in (5, 7):  # int32_data, int64_data
            ints.extend(repeated_varints(wire, value))
        elif field == 8:
            name = as_str(wire, value)
        elif field == 9:
            raw = as_bytes(wire, value)
        elif field == 10:
            doubles.append(repeated_fixed(wire, value, "<d"))
        elif field == 14 and as_int(wire, value) == _DATA_LOCATION_EXTERNAL:
            raise WireError(f"tensor {name or '?'} keeps its data in an external file")
    dtype = _NUMPY_DTYPES.get(data_type)
    if dtype is None:
        raise WireError(f"tensor {name!r} has data type {data_type}, which this reader does not decode")
    count = int(np.prod(dims, dtype=np.int64))
    if raw is not None:
        if len(raw) != count * dtype.itemsize:
            raise WireError(f"tensor {name!r}: {len(raw)} raw bytes for shape {tuple(dims)} of {dtype}")
        array = np.frombuffer(raw, dtype=dtype)
    elif data_type == 1:
        array = np.frombuffer(b"".join(floats), dtype=dtype)
    elif data_type == 11:
        array = np.frombuffer(b"".join(doubles), dtype=dtype)
    elif data_type == 10:  # float16 bit patterns travel in int32_data
        array = np.array(ints, dtype=np.uint16).view(np.float16)
    else:
        array = np.array(ints, dtype=np.int64).astype(dtype)
    if array.size != count:
        raise WireError(f"tensor {name!r}: {array.size} values for shape {tuple(dims)}")
    return name, array.reshape(dims).copy()


def _parse_node(buf: bytes) -> OnnxNode:
    inputs: list[str] = []
    outputs: list[str] = []
    name = op_type = ""
    for field, wire, value in iter_fields(buf):
        if field == 1:
            inputs.append(as_str(wire, value))
        elif field == 2:
            outputs.append(as_str(wire, value))
        elif field == 3:
            name = as_str(wire, value)
        elif field == 4:
            op_type = as_str(wire, value)
    if not op_type:
        raise WireError("a node without an op_type")
    return OnnxNode(op_type=op_type, inputs=tuple(inputs), outputs=tuple(outputs), name=name)


def parse_model(data: bytes) -> OnnxGraph:
    """Parse serialized ``ModelProto`` bytes; raises ``ModelUnavailable`` when they are not one."""
    try:
        graphs = [as_bytes(wire, value) for field, wire, value in iter_fields(data) if field == 7]
        if len(graphs) != 1:
            raise WireError(f"{len(graphs)} graphs in the model, expected one")
        nodes: list[OnnxNode] = []
        initializers: dict[str, np.ndarray] = {}
        for field, wire, value in iter_fields(graphs[0]):
            if field == 1:
                nodes.append(_parse_node(as_bytes(wire, value)))
            elif field == 5:
                name, array = _parse_tensor(as_bytes(wire, value))
                initializers[name] = array
    except WireError as exc:
        raise ModelUnavailable(f"not an ONNX model: {exc}") from exc
    if not nodes:
        raise ModelUnavailable("not an ONNX model: the graph has no nodes")
    logger.debug("parsed ONNX graph: %d nodes, %d initializers", len(nodes), len(initializers))
    return OnnxGraph(nodes=tuple(nodes), initializers=MappingProxyType(initializers))


def read_onnx(path: str | Path) -> OnnxGraph:
    """Read an ``.onnx`` file; ``ModelUnavailable`` naming the file when it is missing or not a model."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelUnavailable(f"cannot read ONNX file {path}: {exc}") from exc
    try:
        return parse_model(data)
    except ModelUnavailable as exc:
        raise ModelUnavailable(f"{path}: {exc.message}") from exc
