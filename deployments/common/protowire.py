"""The protobuf wire format, decoded by hand: enough to read model files without the protobuf runtime.

Frozen TensorFlow graphs (DCT-Net) and ONNX models (MODNet) are protobuf messages. Their readers
(:mod:`deployments.cartoon.graphdef`, :mod:`deployments.common.onnx_graph`) split messages into fields here and
interpret the field numbers of their own schema. Malformed bytes raise :class:`WireError`; each reader turns it into
:class:`~deployments.common.errors.ModelUnavailable` naming the file.
"""

from __future__ import annotations

import struct

# Protobuf wire types.
VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5

Field = tuple[int, int, "int | bytes"]


class WireError(ValueError):
    """The bytes are not valid protobuf wire format (or not the message we expect)."""


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("varint longer than 10 bytes")


def signed64(value: int) -> int:
    """Protobuf ``int64``/``int32`` fields carry negatives as 64-bit two's complement varints."""
    return value - (1 << 64) if value >= 1 << 63 else value


def iter_fields(buf: bytes) -> list[Field]:
    """Split one message into ``(field_number, wire_type, value)``; ``value`` is an int or the raw bytes."""
    fields: list[Field] = []
    pos = 0
    end = len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise WireError("field number 0")
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire == FIXED64:
            if pos + 8 > end:
                raise WireError("truncated fixed64")
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise WireError("truncated fixed32")
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        elif wire == LEN:
            length, pos = read_varint(buf, pos)
            if pos + length > end:
                raise WireError("length-delimited field runs past its message")
            value, pos = buf[pos : pos + length], pos + length
        else:
            raise WireError(f"unsupported wire type {wire}")
        fields.append((field, wire, value))
    return fields


def as_bytes(wire: int, value: int | bytes) -> bytes:
    if wire != LEN or not isinstance(value, bytes):
        raise WireError("expected a length-delimited field")
    return value


def as_str(wire: int, value: int | bytes) -> str:
    try:
        return as_bytes(wire, value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WireError("string field is not UTF-8") from exc


def as_int(wire: int, value: int | bytes) -> int:
    if wire != VARINT or not isinstance(value, int):
        raise WireError("expected a varint field")
    return signed64(value)


def repeated_varints(wire: int, value: int | bytes) -> list[int]:
    """A repeated integer field, either packed (one length-delimited run) or one element per occurrence."""
    if wire == VARINT:
        return [as_int(wire, value)]
    packed = as_bytes(wire, value)
    out = []
    pos = 0
    while pos < len(packed):
        item, pos = read_varint(packed, pos)
        out.append(signed64(item))
    return out


def repeated_fixed(wire: int, value: int | bytes, fmt: str) -> bytes:
    """Raw little-endian bytes of a repeated fixed-width field (float ``<f``/double ``<d``), packed or not."""
    size = struct.calcsize(fmt)
    if wire == LEN:
        packed = as_bytes(wire, value)
        if len(packed) % size:
            raise WireError("packed fixed-width field has a partial element")
        return packed
    if (wire, size) in ((FIXED32, 4), (FIXED64, 8)):
        return int(value).to_bytes(size, "little")
    raise WireError("wrong wire type for a fixed-width field")
