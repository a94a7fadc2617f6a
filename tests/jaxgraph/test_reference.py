"""Constant folding: weight-only subgraphs become weights, ids and outputs are kept."""

import numpy as np

from jaxgraph import GraphBuilder, execute_reference, fold_constants, random_inputs


def test_fold_constants_keeps_ids_and_outputs():
    rng = np.random.default_rng(0)
    b = GraphBuilder()
    x = b.input("x", (1, 3, 5, 5))
    v = b.input("v", (4,))
    w1 = b.weight("w1", rng.standard_normal((2, 3, 1, 1)).astype(np.float32))
    w3 = b.weight("w3", rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    merged = b.add("concat", [b.add("enlarge", [w1], kernel=(3, 3)), w3], axis=0)  # weight-only: (6, 3, 3, 3)
    y = b.add("conv2d", [x, merged], pads=(1, 1, 1, 1))
    halves = b.add_outputs("split", [b.weight("s", rng.standard_normal((6,)).astype(np.float32))], axis=0, sizes=(2, 4))
    scale = b.add("reshape", [b.add("concat", [halves[1], halves[0]], axis=0)], shape=(6, 1, 1))
    z = b.add("mul", [y, scale])
    u = b.add("add", [v, halves[1]])  # a multi-output constant read directly by a runtime op
    graph = b.build({"y": y, "z": z, "u": u})
    folded = fold_constants(graph)
    assert all(n.op == "weight" or not n.constant for n in folded.nodes.values())
    assert folded.nodes[merged.node].op == "weight" and folded.nodes[merged.node].shape == (6, 3, 3, 3)
    assert folded.nodes[scale.node].op == "weight"
    assert set(folded.nodes) - set(graph.nodes) == {max(graph.nodes) + 1}  # the split part read by `add`
    inputs = random_inputs(graph)
    expected = execute_reference(graph, inputs)
    for name, value in execute_reference(folded, inputs).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6)
    assert fold_constants(folded) is folded
