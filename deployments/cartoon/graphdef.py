"""Read frozen TensorFlow GraphDef (``.pb``) files without TensorFlow or the protobuf runtime.

DCT-Net's official weights ship only as frozen TF1 graphs. Rather than carry TensorFlow (or generated protobuf classes)
into the service, this module decodes the protobuf wire format directly: varints and length-delimited fields, following
``tensorflow/core/framework/{graph,node_def,attr_value,tensor,tensor_shape}.proto``. It keeps what an inference port
needs: every node's name, op, inputs and attributes, and ``Const`` tensors decoded to numpy.

Anything that does not parse as a GraphDef raises :class:`~deployments.common.errors.ModelUnavailable`.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Union

import numpy as np

from deployments.common.errors import ModelUnavailable

logger = logging.getLogger(__name__)

# Protobuf wire types.
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5

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


class _WireError(ValueError):
    """The bytes are not valid protobuf wire format (or not the message we expect)."""


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _WireError("varint longer than 10 bytes")


def _signed64(value: int) -> int:
    """Protobuf ``int64``/``int32`` fields carry negatives as 64-bit two's complement varints."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _iter_fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """Split one message into ``(field_number, wire_type, value)``; ``value`` is an int or the raw bytes."""
    fields: list[tuple[int, int, int | bytes]] = []
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise _WireError("field number 0")
        if wire == _VARINT:
            value, pos = _read_varint(buf, pos)
        elif wire == _FIXED64:
            if pos + 8 > end:
                raise _WireError("truncated fixed64")
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == _FIXED32:
            if pos + 4 > end:
                raise _WireError("truncated fixed32")
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        elif wire == _LEN:
            length, pos = _read_varint(buf, pos)
            if pos + length > end:
                raise _WireError("length-delimited field runs past its message")
            value, pos = buf[pos : pos + length], pos + length
        else:
            raise _WireError(f"unsupported wire type {wire}")
        fields.append((field, wire, value))
    return fields


def _as_bytes(wire: int, value: int | bytes) -> bytes:
    if wire != _LEN or not isinstance(value, bytes):
        raise _WireError("expected a length-delimited field")
    return value


def _as_str(wire: int, value: int | bytes) -> str:
    try:
        return _as_bytes(wire, value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _WireError("string field is not UTF-8") from exc


def _as_int(wire: int, value: int | bytes) -> int:
    if wire != _VARINT or not isinstance(value, int):
        raise _WireError("expected a varint field")
    return _signed64(value)


def _repeated_varints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field, either packed (one length-delimited run) or one element per occurrence."""
    if wire == _VARINT:
        return [_as_int(wire, value)]
    packed = _as_bytes(wire, value)
    out = []
    pos = 0
    while pos < len(packed):
        item, pos = _read_varint(packed, pos)
        out.append(_signed64(item))
    return out


def _repeated_fixed(wire: int, value: int | bytes, fmt: str) -> bytes:
    """Raw little-endian bytes of a repeated fixed-width field (float ``<f``/double ``<d``), packed or not."""
    size = struct.calcsize(fmt)
    if wire == _LEN:
        packed = _as_bytes(wire, value)
        if len(packed) % size:
            raise _WireError("packed fixed-width field has a partial element")
        return packed
    if (wire, size) in ((_FIXED32, 4), (_FIXED64, 8)):
        return int(value).to_bytes(size, "little")
    raise _WireError("wrong wire type for a fixed-width field")


def _parse_shape(buf: bytes) -> tuple[int, ...] | None:
    dims: list[int] = []
    unknown_rank = False
    for field, wire, value in _iter_fields(buf):
        if field == 2:  # dim
            size = 0
            for dim_field, dim_wire, dim_value in _iter_fields(_as_bytes(wire, value)):
                if dim_field == 1:
                    size = _as_int(dim_wire, dim_value)
            dims.append(size)
        elif field == 3:  # unknown_rank
            unknown_rank = bool(_as_int(wire, value))
    return None if unknown_rank else tuple(dims)


def _parse_tensor(buf: bytes) -> np.ndarray | UnsupportedTensor:
    """Decode a ``TensorProto``: ``tensor_content`` bytes, else the typed ``*_val`` field (last value fills up)."""
    dtype_enum = 0
    shape: tuple[int, ...] | None = ()
    content: bytes | None = None
    raw_values: dict[int, list[tuple[int, int | bytes]]] = {}
    strings: list[bytes] = []
    for field, wire, value in _iter_fields(buf):
        if field == 1:
            dtype_enum = _as_int(wire, value)
        elif field == 2:
            shape = _parse_shape(_as_bytes(wire, value))
        elif field == 4:
            content = _as_bytes(wire, value)
        elif field == 8:
            strings.append(_as_bytes(wire, value))
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
            raise _WireError(f"tensor_content has {len(content)} bytes for shape {shape} of {dtype}")
        return np.frombuffer(content, dtype=dtype).reshape(shape).copy()
    return _fill(_typed_values(dtype_enum, dtype, raw_values.get(_VALUE_FIELD[dtype_enum], [])), count, shape)


def _typed_values(dtype_enum: int, dtype: np.dtype, occurrences: list[tuple[int, int | bytes]]) -> np.ndarray:
    if dtype_enum in (1, 2):  # float_val / double_val are fixed-width
        fmt = "<f" if dtype_enum == 1 else "<d"
        raw = b"".join(_repeated_fixed(wire, value, fmt) for wire, value in occurrences)
        return np.frombuffer(raw, dtype=dtype).copy()
    ints = [item for wire, value in occurrences for item in _repeated_varints(wire, value)]
    if dtype_enum == 19:  # half_val holds the float16 bit patterns in int32s
        return np.array(ints, dtype=np.uint16).view(np.float16)
    if dtype.kind == "u":  # uint32/uint64 varints are not sign-extended
        return np.array([item & ((1 << 64) - 1) for item in ints], dtype=np.uint64).astype(dtype)
    return np.array(ints, dtype=np.int64).astype(dtype)


def _fill(values: np.ndarray, count: int, shape: tuple[int, ...]) -> np.ndarray:
    """TF semantics for the ``*_val`` fields: none → zeros, fewer than needed → repeat the last value."""
    if len(values) > count:
        raise _WireError(f"{len(values)} values for a tensor of {count} elements")
    if len(values) == 0:
        return np.zeros(shape, dtype=values.dtype) if values.dtype != object else np.full(shape, b"", dtype=object)
    if len(values) < count:
        values = np.concatenate([values, np.repeat(values[-1:], count - len(values))])
    return values.reshape(shape)


def _parse_list(buf: bytes) -> tuple:
    items: list[AttrValue] = []
    for field, wire, value in _iter_fields(buf):
        if field == 2:
            items.append(_as_bytes(wire, value))
        elif field in (3, 6):  # i, type
            items.extend(_repeated_varints(wire, value))
        elif field == 4:
            items.extend(float(x) for x in np.frombuffer(_repeated_fixed(wire, value, "<f"), dtype="<f4"))
        elif field == 5:
            items.extend(bool(x) for x in _repeated_varints(wire, value))
        elif field == 7:
            items.append(_parse_shape(_as_bytes(wire, value)))
        elif field == 8:
            items.append(_parse_tensor(_as_bytes(wire, value)))
        elif field == 9:
            items.append(_parse_func(_as_bytes(wire, value)))
    return tuple(items)


def _parse_func(buf: bytes) -> FunctionRef:
    name = ""
    for field, wire, value in _iter_fields(buf):
        if field == 1:
            name = _as_str(wire, value)
    return FunctionRef(name)


def _parse_attr_value(buf: bytes) -> AttrValue:
    result: AttrValue = ()
    for field, wire, value in _iter_fields(buf):
        if field == 1:
            result = _parse_list(_as_bytes(wire, value))
        elif field == 2:
            result = _as_bytes(wire, value)
        elif field == 3:
            result = _as_int(wire, value)
        elif field == 4:
            result = float(np.frombuffer(_repeated_fixed(wire, value, "<f"), dtype="<f4")[0])
        elif field == 5:
            result = bool(_as_int(wire, value))
        elif field == 6:
            result = _as_int(wire, value)
        elif field == 7:
            result = _parse_shape(_as_bytes(wire, value))
        elif field == 8:
            result = _parse_tensor(_as_bytes(wire, value))
        elif field == 9:
            result = _as_str(wire, value)
        elif field == 10:
            result = _parse_func(_as_bytes(wire, value))
    return result


def _parse_node(buf: bytes) -> GraphNode:
    name = op = device = ""
    inputs: list[str] = []
    attrs: dict[str, AttrValue] = {}
    for field, wire, value in _iter_fields(buf):
        if field == 1:
            name = _as_str(wire, value)
        elif field == 2:
            op = _as_str(wire, value)
        elif field == 3:
            inputs.append(_as_str(wire, value))
        elif field == 4:
            device = _as_str(wire, value)
        elif field == 5:  # map<string, AttrValue> entry
            key, attr = "", b""
            for entry_field, entry_wire, entry_value in _iter_fields(_as_bytes(wire, value)):
                if entry_field == 1:
                    key = _as_str(entry_wire, entry_value)
                elif entry_field == 2:
                    attr = _as_bytes(entry_wire, entry_value)
            attrs[key] = _parse_attr_value(attr)
    if not name or not op:
        raise _WireError("a node without a name or an op")
    return GraphNode(name=name, op=op, inputs=tuple(inputs), attrs=MappingProxyType(attrs), device=device)


def parse_graph(data: bytes) -> GraphDef:
    """Parse serialized GraphDef bytes; raises ``ModelUnavailable`` when they are not one."""
    try:
        nodes = tuple(_parse_node(_as_bytes(wire, value)) for field, wire, value in _iter_fields(data) if field == 1)
    except _WireError as exc:
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
