"""A minimal protobuf wire encoder for TensorFlow GraphDefs, so tests can write frozen graphs without TensorFlow."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

DT_FLOAT, DT_INT32 = 1, 3


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negatives as 64-bit two's complement, like protobuf int32/int64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3 | 0) + varint(value)


def field_bytes(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_fixed32(number: int, raw: bytes) -> bytes:
    return varint(number << 3 | 5) + raw


def shape_proto(dims: tuple[int, ...]) -> bytes:
    return b"".join(field_bytes(2, field_varint(1, dim)) for dim in dims)


def tensor_proto(dtype: int, dims: tuple[int, ...], *, content: bytes = b"", values: bytes = b"") -> bytes:
    header = field_varint(1, dtype) + field_bytes(2, shape_proto(dims))
    return header + (field_bytes(4, content) if content else b"") + values


def attr_entry(key: str, attr_value: bytes) -> bytes:
    return field_bytes(5, field_bytes(1, key.encode()) + field_bytes(2, attr_value))


def node_proto(name: str, op: str, inputs: tuple[str, ...] = (), attrs: bytes = b"") -> bytes:
    body = field_bytes(1, name.encode()) + field_bytes(2, op.encode())
    body += b"".join(field_bytes(3, source.encode()) for source in inputs)
    return field_bytes(1, body + attrs)


def const_node(name: str, dtype: int, tensor: bytes) -> bytes:
    attrs = attr_entry("dtype", field_varint(6, dtype)) + attr_entry("value", field_bytes(8, tensor))
    return node_proto(name, "Const", attrs=attrs)


def dctnet_graph(constants: Mapping[str, np.ndarray], eps: float) -> bytes:
    """A frozen graph with DCT-Net's weight Consts and the guided filter's ``RealDiv(cov, AddV2(var, eps))``."""
    nodes = [
        const_node(name, DT_FLOAT, tensor_proto(DT_FLOAT, tuple(value.shape), content=value.astype("<f4").tobytes()))
        for name, value in constants.items()
    ]
    eps_tensor = tensor_proto(DT_FLOAT, (), content=np.float32(eps).tobytes())
    nodes += [
        node_proto("input_image", "Placeholder", attrs=attr_entry("dtype", field_varint(6, DT_FLOAT))),
        const_node("guided_filter/add/y", DT_FLOAT, eps_tensor),
        node_proto("guided_filter/add", "AddV2", ("guided_filter/var", "guided_filter/add/y")),
        node_proto("guided_filter/truediv", "RealDiv", ("guided_filter/cov", "guided_filter/add")),
    ]
    return b"".join(nodes)
