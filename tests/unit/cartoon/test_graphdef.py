"""The GraphDef reader against graphs encoded here with a minimal protobuf wire encoder (no protobuf runtime)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from deployments.cartoon.graphdef import GraphNode, read_graph
from deployments.common.errors import ModelUnavailable
from tests.tf_graph import (
    DT_FLOAT,
    DT_INT32,
    attr_entry,
    const_node,
    field_bytes,
    field_fixed32,
    field_varint,
    node_proto,
    shape_proto,
    tensor_proto,
    varint,
)

# --- the graph under test -------------------------------------------------------------------------------------------

WEIGHTS = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7 - 1.5
PACKED_FLOATS = np.array([0.1, -2.5, 3e-8], dtype=np.float32)
UNPACKED_FLOATS = np.array([1.25, -0.0, 7.5], dtype=np.float32)
INTS = np.array([[1, -2], [300000, -2147483648]], dtype=np.int32)
INT_CONTENT = np.array([5, -6, 7], dtype=np.int32)


def float_values(*values: float) -> bytes:
    return field_bytes(5, struct.pack(f"<{len(values)}f", *values))


def encoded_graph() -> bytes:
    unpacked_floats = b"".join(field_fixed32(5, struct.pack("<f", value)) for value in UNPACKED_FLOATS)
    packed_ints = field_bytes(7, b"".join(varint(int(value)) for value in INTS.ravel()))
    placeholder_attrs = attr_entry("dtype", field_varint(6, DT_FLOAT)) + attr_entry(
        "shape", field_bytes(7, shape_proto((-1, -1, 3)))
    )
    conv_attrs = (
        attr_entry("T", field_varint(6, DT_FLOAT))
        + attr_entry("strides", field_bytes(1, field_bytes(3, b"".join(varint(s) for s in (1, 2, 2, 1)))))
        + attr_entry("padding", field_bytes(2, b"SAME"))
        + attr_entry("alpha", field_fixed32(4, struct.pack("<f", 0.2)))
        + attr_entry("use_cudnn_on_gpu", field_varint(5, 1))
    )
    return b"".join(
        [
            const_node("net/weights", DT_FLOAT, tensor_proto(DT_FLOAT, (2, 3, 4), content=WEIGHTS.tobytes())),
            const_node("net/packed", DT_FLOAT, tensor_proto(DT_FLOAT, (3,), values=float_values(*PACKED_FLOATS))),
            const_node("net/unpacked", DT_FLOAT, tensor_proto(DT_FLOAT, (3,), values=unpacked_floats)),
            const_node("net/filled", DT_FLOAT, tensor_proto(DT_FLOAT, (2, 2), values=float_values(0.5))),
            const_node("net/scalar", DT_FLOAT, tensor_proto(DT_FLOAT, (), values=float_values(127.5))),
            const_node("net/ints", DT_INT32, tensor_proto(DT_INT32, (2, 2), values=packed_ints)),
            const_node("net/int_content", DT_INT32, tensor_proto(DT_INT32, (3,), content=INT_CONTENT.tobytes())),
            node_proto("input", "Placeholder", attrs=placeholder_attrs),
            node_proto("net_1/conv", "Conv2D", ("input", "net/weights"), conv_attrs),
        ]
    )


def test_constants_read_back_exactly() -> None:
    consts = read_graph(encoded_graph()).constants()

    assert sorted(consts) == sorted(
        ["net/weights", "net/packed", "net/unpacked", "net/filled", "net/scalar", "net/ints", "net/int_content"]
    )
    expected = {
        "net/weights": WEIGHTS,
        "net/packed": PACKED_FLOATS,
        "net/unpacked": UNPACKED_FLOATS,
        "net/filled": np.full((2, 2), 0.5, dtype=np.float32),
        "net/scalar": np.array(127.5, dtype=np.float32),
        "net/ints": INTS,
        "net/int_content": INT_CONTENT,
    }
    for name, want in expected.items():
        got = consts[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name  # bit-exact, -0.0 included


def test_nodes_keep_ops_inputs_and_attrs() -> None:
    graph = read_graph(encoded_graph())

    conv = graph.node("net_1/conv")
    assert isinstance(conv, GraphNode)
    assert (conv.op, conv.inputs) == ("Conv2D", ("input", "net/weights"))
    assert conv.attrs["strides"] == (1, 2, 2, 1)
    assert conv.attrs["padding"] == b"SAME"
    assert conv.attrs["T"] == DT_FLOAT
    assert conv.attrs["alpha"] == pytest.approx(0.2) and conv.attrs["use_cudnn_on_gpu"] is True
    assert graph.node("input").attrs["shape"] == (-1, -1, 3)
    assert [node.name for node in graph.nodes][-2:] == ["input", "net_1/conv"]
    with pytest.raises(KeyError):
        graph.node("absent")


def test_reads_from_a_path(tmp_path) -> None:
    path = tmp_path / "tiny.pb"
    path.write_bytes(encoded_graph())

    assert read_graph(path).constants()["net/ints"].tolist() == INTS.tolist()


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"This is a text file, not a graph.\n",
        b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
        np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
        encoded_graph()[:-5],  # truncated
    ],
    ids=["empty", "text", "png", "random", "truncated"],
)
def test_non_graph_bytes_raise_model_unavailable(payload: bytes, tmp_path) -> None:
    path = tmp_path / "model.pb"
    path.write_bytes(payload)

    with pytest.raises(ModelUnavailable, match="not a TensorFlow GraphDef"):
        read_graph(path)


def test_missing_file_raises_model_unavailable(tmp_path) -> None:
    with pytest.raises(ModelUnavailable, match="cannot read"):
        read_graph(tmp_path / "absent.pb")
