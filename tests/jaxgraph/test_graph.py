"""The IR: builder checks, consumer lists, patches (incremental commit == rebuild), structural hash."""

from dataclasses import replace

import numpy as np
import pytest

from jaxgraph import Graph, GraphBuilder, Patch, Ref, execute_reference, random_inputs


def chain():
    """x -> conv -> relu -> conv -> output, with weights w1, w2."""
    b = GraphBuilder()
    x = b.input("x", (1, 2, 5, 5))
    w1 = b.weight("w1", np.ones((3, 2, 3, 3), np.float32))
    c1 = b.add("conv2d", [x, w1], "c1", pads=(1, 1, 1, 1))
    r = b.add("relu", [c1], "r")
    c2 = b.add("conv2d", [r, b.weight("w2", np.ones((4, 3, 1, 1), np.float32))], "c2")
    return b.build({"y": c2}), (x, w1, c1, r, c2)


def test_builder_shapes_uses_and_interface():
    graph, (x, w1, c1, r, c2) = chain()
    assert graph.output_shapes == {"y": (1, 4, 5, 5)}
    assert graph.input_shapes == {"x": (1, 2, 5, 5)}
    assert graph.uses(c1.node) == ((r.node, 0),)
    assert graph.num_ops == 3 and graph.op_counts == {"conv2d": 2, "relu": 1}
    assert graph.num_edges == 5  # conv (x, w1), relu (c1), conv (r, w2)
    twice = GraphBuilder()
    x2 = twice.input("x", (2, 2))
    assert twice.build({"y": twice.add("add", [x2, x2], "a")}).num_edges == 2  # one tensor read twice: two edges
    assert graph.nodes[w1.node].constant and not graph.nodes[c1.node].constant
    assert graph.order.index(c1.node) < graph.order.index(r.node) < graph.order.index(c2.node)
    assert graph.by_op["conv2d"] == (c1.node, c2.node)


def test_builder_rejects_bad_names_and_drops_dead_nodes():
    b = GraphBuilder()
    x = b.input("x", (2, 2))
    with pytest.raises(ValueError, match="not unique"):
        b.input("x", (2, 2))
    with pytest.raises(ValueError, match="non-positive"):
        b.input("z", (0, 2))
    b.add("relu", [x], "dead")
    graph = b.build({"y": b.add("tanh", [x])})
    assert graph.op_counts == {"tanh": 1}


def test_check_inputs_errors():
    graph, _ = chain()
    with pytest.raises(ValueError, match="missing \\['x'\\], unexpected \\['z'\\]"):
        graph.check_inputs({"z": np.zeros((1, 2, 5, 5))})
    with pytest.raises(ValueError, match="input 'x' has shape \\(1, 2, 5\\)"):
        graph.check_inputs({"x": np.zeros((1, 2, 5))})
    with pytest.raises(ValueError, match="dtype int64"):
        graph.check_inputs({"x": np.zeros((1, 2, 5, 5), np.int64)})


def test_validate_detects_cycles_and_missing_nodes():
    b = GraphBuilder()
    x = b.input("x", (3,))
    t = b.add("tanh", [x], "t")
    r = b.add("relu", [t], "r")
    graph = b.build({"y": r})
    looped = {**graph.nodes, t.node: replace(graph.nodes[t.node], inputs=(r,))}
    with pytest.raises(ValueError, match="cycle"):
        Graph.from_nodes(looped, graph.inputs, graph.outputs, graph.output_names)
    dangling = {**graph.nodes, t.node: replace(graph.nodes[t.node], inputs=(Ref(99),))}
    with pytest.raises(ValueError, match="reads missing node 99"):
        Graph.from_nodes(dangling, graph.inputs, graph.outputs, graph.output_names)


def test_patch_commit_matches_rebuild():
    """Fuse relu into c1 by hand: the incremental commit equals the same graph rebuilt from scratch."""
    graph, (x, w1, c1, r, c2) = chain()
    patch = Patch(graph)
    fused = patch.add("conv2d", [x, w1], pads=(1, 1, 1, 1), activation="relu")
    patch.replace(r, fused)
    patch.remove(r.node, c1.node)
    new, delta = patch.commit()
    new.validate()
    rebuilt = Graph.from_nodes(new.nodes, new.inputs, new.outputs, new.output_names)
    assert new.structure_hash == rebuilt.structure_hash
    assert dict(new._uses) == dict(rebuilt._uses)
    assert delta.removed == {r.node, c1.node} and delta.added == {fused.node}
    assert delta.rewired == {c2.node} and delta.touched == {x.node, w1.node}
    x_in = random_inputs(graph)
    np.testing.assert_allclose(execute_reference(new, x_in)["y"], execute_reference(graph, x_in)["y"])
    assert len(graph) == 6  # the original is untouched


def test_commit_removes_nodes_left_without_consumers():
    b = GraphBuilder()
    x = b.input("x", (3,))
    r = b.add("relu", [x], "r")
    m = b.add("mul", [x, b.weight("w", np.ones(3, np.float32))], "m")
    y = b.add("add", [r, m], "y")
    graph = b.build({"y": y})
    patch = Patch(graph)
    patch.replace(y, r)
    patch.remove(y.node)
    new, delta = patch.commit()
    assert set(new.nodes) == {x.node, r.node} and len(delta.removed) == 3
    assert new.outputs == (r,) and new.uses(x.node) == ((r.node, 0),)


def test_patch_refuses_to_drop_used_nodes_and_shape_changes():
    graph, (x, w1, c1, r, c2) = chain()
    patch = Patch(graph)
    patch.remove(c1.node)
    with pytest.raises(ValueError, match="still used"):
        patch.commit()
    with pytest.raises(ValueError, match="cannot replace"):
        Patch(graph).replace(c1, c2)


def test_structure_hash_ignores_rewrite_order():
    """Two independent rewrites applied in either order give the same hash (content-addressed new ids)."""
    b = GraphBuilder()
    x = b.input("x", (4, 4))
    a = b.add("relu", [b.add("tanh", [x], "t1")], "r1")
    c = b.add("relu", [b.add("sigmoid", [x], "s1")], "r2")
    graph = b.build({"a": a, "c": c})

    def swap(g, relu):
        """relu(f(x)) -> f'(x) where f' is an equivalent fresh op (tanh -> tanh, rebuilt)."""
        p = Patch(g)
        inner = g.nodes[g.nodes[relu].inputs[0].node]
        new = p.add("relu", [p.add(inner.op, inner.inputs)])
        p.replace(Ref(relu), new)
        p.remove(relu)
        return p.commit()[0]

    one = swap(swap(graph, a.node), c.node)
    two = swap(swap(graph, c.node), a.node)
    assert one.structure_hash == two.structure_hash != graph.structure_hash
    assert set(one.nodes) == set(two.nodes)


def test_patch_shares_identical_new_nodes():
    graph, (x, w1, c1, r, c2) = chain()
    patch = Patch(graph)
    first = patch.add("tanh", [x])
    assert patch.add("tanh", [x]) == first
