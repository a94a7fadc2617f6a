"""`GraphCodec` and the attribute vector: encode then decode gives back every node of the builders and of the planted
graphs (ops, attributes, shapes, inputs, leaves); the attribute vector's words are the layout's, worked out by hand,
on the host and in jit alike; bad input is refused by name."""

import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgraph import Graph, GraphBuilder, GraphCodec, JaxEnv, random_graph, random_taso_graph, trap_graph
from jaxgraph.jax_graph import attr_code, attr_field, attr_row
from jaxgraph.rl import toy_graph

from .conftest import SMALL, merge_graph, mixed_graph, small_model


def assert_same_graph(decoded, graph):
    """Node k of `graph.order` came back as node k of `decoded`: same op, attributes, shapes, constness, inputs (ids
    mapped to slots), leaf names and weight values; same inputs and outputs."""
    slot = {node_id: k for k, node_id in enumerate(graph.order)}
    assert sorted(decoded.nodes) == list(range(len(graph)))
    for node_id, k in slot.items():
        want, got = graph.nodes[node_id], decoded.nodes[k]
        assert (got.op, dict(got.attrs), got.shapes, got.constant) == (want.op, dict(want.attrs), want.shapes,
                                                                     want.constant), (k, want.op)
        assert [tuple(r) for r in got.inputs] == [(slot[r.node], r.index) for r in want.inputs]
        if want.op in ("input", "weight"):
            assert got.name == want.name and got.value is want.value
    assert list(decoded.inputs) == [slot[i] for i in graph.inputs]
    assert [tuple(r) for r in decoded.outputs] == [(slot[r.node], r.index) for r in graph.outputs]
    assert decoded.output_names == graph.output_names


PLANTED = {
    "toy": lambda: toy_graph(3).graph,
    "trap": lambda: trap_graph(0).graph,
    "mixed": mixed_graph,
    "merge": merge_graph,
    "random": lambda: random_graph(1),
    "random_taso": lambda: random_taso_graph(2),
}


@pytest.mark.parametrize("name", [*SMALL, "bert", "mobilenet_v2", *PLANTED])
def test_encode_then_decode_gives_the_graph_back(name):
    graph = PLANTED[name]() if name in PLANTED else small_model(name)
    codec = GraphCodec.over([graph])
    assert_same_graph(codec.decode(codec.encode(graph), graph), graph)


def test_the_codec_is_immutable_and_encodes_graphs_beyond_those_it_was_built_over():
    """A float attribute outside the graphs the codec was built over (bert's layer norm eps 1e-12 and a clip's bounds
    -0.5, 6.25 in a codec built over a toy graph with eps 1e-5 only) comes back exactly from the graph; encoding
    leaves the codec as it was, and the codec refuses assignment. Decoded with another graph, whose floats are not
    the state's, the clip is refused by name."""
    codec = GraphCodec.over([toy_graph(2).graph], node_capacity=600, edge_capacity=1200, min_outputs=4)
    before = dataclasses.replace(codec)
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    clipped = b.build({"y": b.add("clip", [x], min=-0.5, max=6.25)})
    for graph in (small_model("bert"), clipped):
        assert_same_graph(codec.decode(codec.encode(graph), graph), graph)
    assert codec == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        codec.node_capacity = 1
    with pytest.raises(ValueError, match="clip attribute min has fingerprint"):
        codec.decode(codec.encode(clipped), small_model("bert"))


def test_a_jax_env_decodes_through_its_codec():
    graph = mixed_graph()
    env = JaxEnv(graph)
    assert env.codec == GraphCodec.over([graph], min_outputs=env.max_siblings)
    assert_same_graph(env.decode(env.encode(graph)), graph)


def test_attribute_codes_and_words_worked_by_hand():
    """The layout, word by word: activation 0, stride 1-2, pads 3-6, groups 7, kernel 8-9, axis 10, count 11,
    count_include_pad 12, eps 13, min 14, max 15, tuple length 16, tuple 17-. A float's code is the xor of the two
    32-bit halves of its float64 bits, as an int32: 1.0 = 0x3FF00000_00000000 -> 0x3FF00000, -2.5 =
    0xC0040000_00000000 -> 0xC0040000 - 2**32, 0.1 = 0x3FB99999_9999999A -> 0xA6200003 - 2**32."""
    assert attr_code("activation", "relu") == 1 and attr_code("padding", "VALID") == 1
    assert attr_code("eps", 1.0) == 0x3FF00000 and attr_code("min", -2.5) == 0xC0040000 - 2**32
    assert attr_code("max", 0.1) == 0xA6200003 - 2**32 and attr_code("eps", 0.0) == 0
    width = 21
    conv = {"activation": 1, "stride": (2, 1), "pads": (1, 0, 1, 0), "groups": 4, "kernel": (3, 5)}
    expected_conv = np.zeros(width, np.int32)
    expected_conv[:10] = [1, 2, 1, 1, 0, 1, 0, 4, 3, 5]
    split = {"axis": 1, "sizes": np.array([3, 5, 8], np.int32), "eps": attr_code("eps", 1.0)}
    expected_split = np.zeros(width, np.int32)
    expected_split[[10, 13, 16, 17, 18, 19]] = [1, 0x3FF00000, 3, 3, 5, 8]
    for codes, expected in ((conv, expected_conv), (split, expected_split)):
        host = attr_row(np.zeros(width, np.int32), **codes)
        chex.assert_trees_all_equal(host, expected)
        traced = jax.jit(lambda row, codes=codes: attr_row(row, **codes))(jnp.zeros(width, jnp.int32))
        chex.assert_trees_all_equal(np.asarray(traced), expected)
    chex.assert_trees_all_equal(attr_field(expected_conv, "kernel"), np.array([3, 5], np.int32))
    # a traced tuple length shorter than the words written (the rest written as zeros)
    short = attr_row(jnp.zeros(width, jnp.int32), sizes=jnp.array([3, 0, 0]), tuple_length=jnp.int32(1))
    assert int(short[16]) == 1 and int(short[17]) == 3


def test_bad_input_is_refused_by_name():
    graph = small_model("resnet18")
    with pytest.raises(ValueError, match="node capacity 10"):
        GraphCodec.over([graph], node_capacity=10).encode(graph)
    with pytest.raises(ValueError, match="edge capacity 3"):
        GraphCodec.over([graph], edge_capacity=3).encode(graph)
    with pytest.raises(ValueError, match="node_capacity"):
        GraphCodec.over([graph], node_capacity=0)
    b = GraphBuilder()
    x = b.input("x", (1, 4))
    two = b.build({"y": b.add("relu", [x]), "z": b.add("tanh", [x])})
    with pytest.raises(ValueError, match=r"different output counts \[1, 2\]"):
        GraphCodec.over([graph, two])
    with pytest.raises(ValueError, match="non-empty sequence"):
        GraphCodec.over([])
    with pytest.raises(ValueError, match="'dilation' of op 'relu' has no slot"):
        relu = next(i for i, n in graph.nodes.items() if n.op == "relu")
        nodes = {**graph.nodes, relu: dataclasses.replace(graph.nodes[relu], attrs={"dilation": 2})}
        GraphCodec.over([graph]).encode(Graph.from_nodes(nodes, graph.inputs, graph.outputs, graph.output_names))
    with pytest.raises(ValueError, match="'dilation' has no place"):
        attr_row(np.zeros(21, np.int32), dilation=2)
    # 1.0 (bits 0x3FF00000_00000000) and the float of bits 0x00000000_3FF00000 share the fingerprint 0x3FF00000
    b = GraphBuilder()
    tiny = float(np.array(0x3FF00000, np.uint64).view(np.float64))
    clash = b.build({"y": b.add("clip", [b.input("x", (1, 4))], min=tiny, max=1.0)})
    with pytest.raises(ValueError, match="share the fingerprint 1072693248"):
        GraphCodec.over([clash]).encode(clash)
