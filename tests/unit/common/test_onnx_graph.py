"""The ONNX reader against models encoded here with the minimal protobuf wire encoder (no onnx package)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from deployments.common.errors import ModelUnavailable
from deployments.common.onnx_graph import parse_model, read_onnx
from tests.tf_graph import field_bytes, field_varint

FLOAT, INT64, FLOAT16 = 1, 7, 10
WEIGHT = (np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) - 11.5) / 7.0


def tensor(name: str, dtype: int, dims: tuple[int, ...], *, raw: bytes | None = None, fields: bytes = b"") -> bytes:
    body = b"".join(field_varint(1, dim) for dim in dims) + field_varint(2, dtype) + field_bytes(8, name.encode())
    return body + (field_bytes(9, raw) if raw is not None else b"") + fields


def node(op_type: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> bytes:
    body = b"".join(field_bytes(1, name.encode()) for name in inputs)
    body += b"".join(field_bytes(2, name.encode()) for name in outputs) + field_bytes(4, op_type.encode())
    return field_bytes(1, body)


def model(graph: bytes) -> bytes:
    return field_varint(1, 6) + field_bytes(7, graph)  # ir_version, graph


def conv_model(**extra: bytes) -> bytes:
    initializers = [
        tensor("w", FLOAT, WEIGHT.shape, raw=WEIGHT.tobytes()),
        tensor("b", FLOAT, (2,), fields=field_bytes(4, struct.pack("<2f", 0.5, -1.25))),  # packed float_data
        tensor("shape", INT64, (2,), fields=field_varint(7, 1) + field_varint(7, -1)),  # int64_data, one per field
        tensor("half", FLOAT16, (2,), fields=field_varint(5, 0x3C00) + field_varint(5, 0xC000)),  # 1.0, -2.0
        *extra.values(),
    ]
    graph = node("Conv", ("x", "w", "b"), ("y",)) + node("Reshape", ("y", "shape"), ("z",))
    return model(graph + b"".join(field_bytes(5, item) for item in initializers))


def test_nodes_and_initializers_decode_exactly(tmp_path):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(conv_model())
    graph = read_onnx(path)
    assert [n.op_type for n in graph.nodes] == ["Conv", "Reshape"]
    assert graph.nodes[0].inputs == ("x", "w", "b") and graph.nodes[1].outputs == ("z",)
    assert graph.initializer_inputs("Conv") == [("w", "b")] and graph.initializer_inputs("Reshape") == [("shape",)]
    arrays = graph.initializers
    assert arrays["w"].dtype == np.float32 and np.array_equal(arrays["w"], WEIGHT)
    assert arrays["b"].tolist() == [0.5, -1.25]
    assert arrays["shape"].dtype == np.int64 and arrays["shape"].tolist() == [1, -1]
    assert arrays["half"].dtype == np.float16 and arrays["half"].tolist() == [1.0, -2.0]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xff", "not an ONNX model"),
        (model(b""), "no nodes"),
        (conv_model(bad=tensor("bad", FLOAT, (3,), raw=b"\x00" * 8)), "8 raw bytes for shape"),
        (conv_model(ext=tensor("ext", FLOAT, (1,), fields=field_varint(14, 1))), "external file"),
        (conv_model(odd=tensor("odd", 8, (1,), raw=b"x")), "data type 8"),
    ],
)
def test_what_is_not_a_readable_model_is_model_unavailable(data, message):
    with pytest.raises(ModelUnavailable, match=message):
        parse_model(data)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ModelUnavailable, match="absent.onnx"):
        read_onnx(tmp_path / "absent.onnx")
