"""Read frozen TensorFlow GraphDef (``.pb``) files without TensorFlow or the protobuf runtime.

DCT-Net's official weights ship only as frozen TF1 graphs. Rather than carry TensorFlow (or generated protobuf classes)
into the service, this module decodes the protobuf wire format directly: varints and length-delimited fields, following
``tensorflow/core/framework/{graph,node_def,attr_value,tensor,tensor_shape}.proto``. It keeps what an inference port
needs: every node's name, op, inputs and attributes, and ``Const`` tensors decoded to numpy.

Anything that does not parse as a GraphDef raises :class:`~deployments.common.errors.ModelUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Union

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

# TensorFlow DataType enum values (types.proto) that decode to a numpy dtype.
_NUMPY_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),  # DT_FLOAT
    2: np.dtype("<f8"),  # DT_DOUBLE
    3: np.dtype("<i4"),  # DT_INT32
    4: np.dtype("u1"),  # DT_UINT8
    5: np.dtype("<i2"),  # DT_INT16
    6: np.dtype("i1"),  # DT_INT8
    9: np.dtype("<i8"),  # DT_INT64
    10: np.dtype("?"),  # DT_BOOL
    17: np.dtype("<u2"),  # DT_UINT16
    19: np.dtype("<f2"),  # DT_HALF
    22: np.dtype("<u4"),  # DT_UINT32
    23: np.dtype("<u8"),  # DT_UINT64
}
_DT_STRING = 7

# TensorProto field that holds the typed values of each dtype when ``tensor_content`` is empty.
_VALUE_FIELD: dict[int, int] = {1: 5, 2: 6, 3: 7, 4: 7, 5: 7, 6: 7, 9: 10, 10: 11, 17: 7, 19: 13, 22: 16, 23: 17}


@dataclass(frozen=True)
class UnsupportedTensor:
    """A tensor attribute whose dtype this reader does not decode (complex, resource, variant...)."""

    dtype: int
    shape: tuple[int, ...] | None


@dataclass(frozen=True)
class FunctionRef:
    """A ``func`` attribute: the name of a function in the graph's library (its attrs are not kept)."""

    name: str


AttrValue = Union[bytes, int, float, bool, "tuple[int, ...] | None", np.ndarray, UnsupportedTensor, FunctionRef, tuple]


@dataclass(frozen=True)
class GraphNode:
    """One ``NodeDef``: ``attrs`` maps attribute names to decoded values.

    Attribute values: ``s`` → bytes, ``i`` → int, ``f`` → float, ``b`` → bool, ``type`` → int (TF DataType enum),
    ``shape`` → tuple of dims (``-1`` unknown) or ``None`` for unknown rank, ``tensor`` → ``np.ndarray``,
    ``list`` → tuple of the above.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: Mapping[str, AttrValue]
    device: str = ""


@dataclass(frozen=True)
class GraphDef:
    """The nodes of a frozen graph, in file order, with lookups by name."""

    nodes: tuple[GraphNode, ...]

    def node(self, name: str) -> GraphNode:
        """The node called ``name``; ``KeyError`` if the graph has none."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def constants(self) -> dict[str, np.ndarray]:
        """Every ``Const`` node whose value decodes to numpy, by node name."""
        return {
            node.name: node.attrs["value"]
            for node in self.nodes
            if node.op == "Const" and isinstance(node.attrs.get("value"), np.ndarray)
        }


def _parse_shape(buf: bytes) -> tuple[int, ...] | None:
    dims: list[int] = []
    unknown_rank = False
    for field, wire, value in iter_fields(buf):
        if field == 2:  # dim
            size = 0
            for dim_field, dim_wire, dim_value in iter_fields(as_bytes(wire, value)):
                if dim_field == 1:
                    size = as_int(dim_wire, dim_value)
            dims.append(size)
        elif field == 3:  # unknown_rank
            unknown_rank = bool(as_int(wire, value))
    return None if unknown_rank else tuple(dims)


def _parse_tensor(buf: bytes) -> np.ndarray | UnsupportedTensor:
    """Decode a ``TensorProto``: ``tensor_content`` bytes, else the typed ``*_val`` field (last value fills up)."""
    dtype_enum = 0
    shape: tuple[int, ...] | None = ()
    content: bytes | None = None
    raw_values: dict[int, list[tuple[int, int | bytes]]] = {}
    strings: list[bytes] = []
    for field, wire, value in iter_fields(buf):
        if field == 1:
            dtype_enum = as_int(wire, value)
        elif field == 2:
            shape = _parse_shape(as_bytes(wire, value))
        elif field == 4:
            content = as_bytes(wire, value)
        elif field == 8:
            strings.append(as_bytes(wire, value))
        else:
            raw_values.setdefault(field, []).append((wire, value))
    if shape is None or any(dim < 0 for dim in shape):
        return UnsupportedTensor(dtype_enum, shape)
    count = int(np.prod(shape, dtype=np.int64))
    if dtype_enum == _DT_STRING:
        return _fill(np.array(strings, dtype=object), count, shape)
    dtype = _NUMPY_DTYPES.get(dtype_enum)
    if dtype is None:
        return UnsupportedTensor(dtype_enum, shape)
    if content:
        if len(content) != count * dtype.itemsize:
            raise WireError(f"tensor_content has {len(content)} bytes for shape {shape} of {dtype}")
        return np.frombuffer(content, dtype=dtype).reshape(shape).copy()
    return _fill(_typed_values(dtype_enum, dtype, raw_values.get(_VALUE_FIELD[dtype_enum], [])), count, shape)


def _typed_values(dtype_enum: int, dtype: np.dtype, occurrences: list[tuple[int, int | bytes]]) -> np.ndarray:
    if dtype_enum in (1, 2):  # float_val / double_val are fixed-width
        fmt = "<f" if dtype_enum == 1 else "<d"
        raw = b"".join(repeated_fixed(wire, value, fmt) for wire, value in occurrences)
        return np.frombuffer(raw, dtype=dtype).copy()
    ints = [item for wire, value in occurrences for item in repeated_varints(wire, value)]
    if dtype_enum == 19:  # half_val holds the float16 bit patterns in int32s
        return np.array(ints, dtype=np.uint16).view(np.float16)
    if dtype.kind == "u":  # uint32/uint64 varints are not sign-extended
        return np.array([item & ((1 << 64) - 1) for item in ints], dtype=np.uint64).astype(dtype)
    return np.array(ints, dtype=np.int64).astype(dtype)


def _fill(values: np.ndarray, count: int, shape: tuple[int, ...]) -> np.ndarray:
    """TF semantics for the ``*_val`` fields: none → zeros, fewer than needed → repeat the last value."""
    if len(values) > count:
        raise WireError(f"{len(values)} values for a tensor of {count} elements")
    if len(values) == 0:
        return np.zeros(shape, dtype=values.dtype) if values.dtype != object else np.full(shape, b"", dtype=object)
    if len(values) < count:
        values = np.concatenate([values, np.repeat(values[-1:], count - len(values))])
    return values.reshape(shape)


def _parse_list(buf: bytes) -> tuple:
    items: list[AttrValue] = []
    for field, wire, value in iter_fields(buf):
        if field == 2:
            items.append(as_bytes(wire, value))
        elif field in (3, 6):  # i, type
            items.extend(repeated_varints(wire, value))
        elif field == 4:
            items.extend(float(x) for x in np.frombuffer(repeated_fixed(wire, value, "<f"), dtype="<f4"))
        elif field == 5:
            items.extend(bool(x) for x in repeated_varints(wire, value))
        elif field == 7:
            items.append(_parse_shape(as_bytes(wire, value)))
        elif field == 8:
            items.append(_parse_tensor(as_bytes(wire, value)))
        elif field == 9:
            items.append(_parse_func(as_bytes(wire, value)))
    return tuple(items)


def _parse_func(buf: bytes) -> FunctionRef:
    name = ""
    for field, wire, value in iter_fields(buf):
        if field == 1:
            name = as_str(wire, value)
    return FunctionRef(name)


def _parse_attr_value(buf: bytes) -> AttrValue:
    result: AttrValue = ()
    for field, wire, value in iter_fields(buf):
        if field == 1:
            result = _parse_list(as_bytes(wire, value))
        elif field == 2:
            result = as_bytes(wire, value)
        elif field == 3:
            result = as_int(wire, value)
        elif field == 4:
            result = float(np.frombuffer(repeated_fixed(wire, value, "<f"), dtype="<f4")[0])
        elif field == 5:
            result = bool(as_int(wire, value))
        elif field == 6:
            result = as_int(wire, value)
        elif field == 7:
            result = _parse_shape(as_bytes(wire, value))
        elif field == 8:
            result = _parse_tensor(as_bytes(wire, value))
        elif field == 9:
            result = as_str(wire, value)
        elif field == 10:
            result = _parse_func(as_bytes(wire, value))
    return result


def _parse_node(buf: bytes) -> GraphNode:
    name = op = device = ""
    inputs: list[str] = []
    attrs: dict[str, AttrValue] = {}
    for field, wire, value in iter_fields(buf):
        if field == 1:
            name = as_str(wire, value)
        elif field == 2:
            op = as_str(wire, value)
        elif field == 3:
            inputs.append(as_str(wire, value))
        elif field == 4:
            device = as_str(wire, value)
        elif field == 5:  # map<string, AttrValue> entry
            key, attr = "", b""
            for entry_field, entry_wire, entry_value in iter_fields(as_bytes(wire, value)):
                if entry_field == 1:
                    key = as_str(entry_wire, entry_value)
                elif entry_field == 2:
                    attr = as_bytes(entry_wire, entry_value)
            attrs[key] = _parse_attr_value(attr)
    if not name or not op:
        raise WireError("a node without a name or an op")
    return GraphNode(name=name, op=op, inputs=tuple(inputs), attrs=MappingProxyType(attrs), device=device)


def parse_graph(data: bytes) -> GraphDef:
    """Parse serialized GraphDef bytes; raises ``ModelUnavailable`` when they are not one."""
    try:
        nodes = tuple(_parse_node(as_bytes(wire, value)) for field, wire, value in iter_fields(data) if field == 1)
    except WireError as exc:
        raise ModelUnavailable(f"not a TensorFlow GraphDef: {exc}") from exc
    if not nodes:
        raise ModelUnavailable("not a TensorFlow GraphDef: no nodes")
    logger.debug("parsed GraphDef with %d nodes", len(nodes))
    return GraphDef(nodes=nodes)


def read_graph(path_or_bytes: str | Path | bytes) -> GraphDef:
    """Read a frozen graph from a ``.pb`` path or its bytes; ``ModelUnavailable`` for a missing or non-graph file."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return parse_graph(bytes(path_or_bytes))
    path = Path(path_or_bytes)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelUnavailable(f"cannot read graph file {path}: {exc}") from exc
    try:
        return parse_graph(data)
    except ModelUnavailable as exc:
        raise ModelUnavailable(f"{path}: {exc.message}") from exc
