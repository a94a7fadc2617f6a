"""An independent matcher for data rules: subgraph monomorphisms by networkx's VF2 (`DiGraphMatcher`), then the
acceptance conditions of `jaxgraph.patterns` written out again from their definitions. It shares no code with
the generic matcher (only the pattern data, the IR's shape functions and the graph), so the two agreeing on
random graphs checks the matcher's plan, backtracking and pruning."""

from __future__ import annotations

import networkx as nx

from jaxgraph.graph import Graph, Ref
from jaxgraph.ops import OPS, normalize_attrs


def tf_same_pads(size, kernel, stride):
    """TensorFlow's SAME padding (top, left, bottom, right)."""
    out = []
    for n, k, s in zip(size, kernel, stride):
        total = max(((n + s - 1) // s - 1) * s + k - n, 0)
        out.append((total // 2, total - total // 2))
    return out[0][0], out[1][0], out[0][1], out[1][1]


def _pads(padding, size, kernel, stride):
    """A pattern padding's pads: TensorFlow's SAME, none (VALID), or half the kernel each side (HALF)."""
    if padding == "SAME":
        return tf_same_pads(size, kernel, stride)
    return (kernel[0] // 2, kernel[1] // 2) * 2 if padding == "HALF" else (0, 0, 0, 0)


def _fits(pop, graph: Graph, node_id: int) -> bool:
    node = graph.nodes[node_id]
    if node.op != pop.op or len(node.inputs) != len(pop.inputs):
        return False
    shapes = [graph.shape(r) for r in node.inputs]
    attrs = dict(pop.attrs)
    if pop.op == "matmul":
        return node.attrs["activation"] == attrs["activation"]
    if pop.op == "conv2d":
        if len(shapes[0]) != 4 or len(shapes[1]) != 4:
            return False
        pads = _pads(attrs["padding"], shapes[0][2:], shapes[1][2:], attrs["stride"])
        return (node.attrs["groups"] == 1 and node.attrs["activation"] == attrs["activation"]
                and tuple(node.attrs["stride"]) == tuple(attrs["stride"]) and shapes[1][2:] == tuple(attrs["kernel"])
                and tuple(node.attrs["pads"]) == pads)
    if pop.op in ("add", "mul"):
        return shapes[0] == shapes[1]
    if pop.op == "concat":
        return len(shapes[0]) == attrs["rank"] and node.attrs["axis"] % len(shapes[0]) == attrs["axis"]
    if pop.op == "transpose":
        return tuple(node.attrs["perm"]) == tuple(attrs["perm"])
    return pop.op == "relu"


def networkx_graph(graph: Graph) -> nx.DiGraph:
    """The graph as a networkx DiGraph: an edge per producer-consumer pair, labelled with its (output, input
    position) pairs."""
    g = nx.DiGraph()
    for node_id, node in graph.nodes.items():
        g.add_node(node_id, op=node.op, id=node_id)
    for node_id, node in graph.nodes.items():
        for p, ref in enumerate(node.inputs):
            if g.has_edge(ref.node, node_id):
                g.edges[ref.node, node_id]["slots"] = g.edges[ref.node, node_id]["slots"] | {(ref.index, p)}
            else:
                g.add_edge(ref.node, node_id, slots=frozenset({(ref.index, p)}))
    return g


def _pattern_graph(pattern) -> nx.DiGraph:
    p = nx.DiGraph()
    for k, pop in enumerate(pattern.src):
        p.add_node(k, op=pop.op, pop=pop)
    for k, pop in enumerate(pattern.src):
        for position, t in enumerate(pop.inputs):
            if t.op >= 0:
                old = p.edges[t.op, k]["slots"] if p.has_edge(t.op, k) else frozenset()
                p.add_edge(t.op, k, slots=old | {(t.index, position)})
    return p


def _target_fits(pattern, graph: Graph, binding: dict, externals: dict) -> bool:
    facts = {}
    for e, ref in externals.items():
        facts[(e, 0)] = (graph.shape(ref), graph.nodes[ref.node].constant)
    source = {(k, 0): (graph.nodes[n].shape, graph.nodes[n].constant) for k, n in binding.items()}
    for k, pop in enumerate(pattern.dst):
        attrs, shapes = dict(pop.attrs), [facts[tuple(t)][0] for t in pop.inputs]
        if pop.op in ("add", "mul") and shapes[0] != shapes[1]:
            return False
        ir = {}
        if pop.op == "matmul":
            ir = {"activation": attrs["activation"]}
        elif pop.op == "conv2d":
            if len(shapes[0]) != 4 or len(shapes[1]) != 4:
                return False
            pads = _pads(attrs["padding"], shapes[0][2:], shapes[1][2:], attrs["stride"])
            ir = {"stride": attrs["stride"], "pads": pads, "activation": attrs["activation"]}
        elif pop.op == "concat":
            ir = {"axis": attrs["axis"]}
        elif pop.op == "transpose":
            ir = {"perm": attrs["perm"]}
        elif pop.op == "split":
            replaced = {d.index: source[tuple(s)][0] for s, d in pattern.mapped if d.op == k}
            if any(len(replaced[j]) <= attrs["axis"] for j in range(attrs["parts"])):
                return False
            ir = {"axis": attrs["axis"], "sizes": tuple(replaced[j][attrs["axis"]] for j in range(attrs["parts"]))}
        try:
            out = OPS[pop.op].infer(normalize_attrs(pop.op, ir), shapes)
        except (ValueError, IndexError):
            return False
        constant = all(facts[tuple(t)][1] for t in pop.inputs)
        for j, shape in enumerate(out):
            facts[(k, j)] = (tuple(shape), constant)
    return all(facts[tuple(d)] == source[tuple(s)] for s, d in pattern.mapped)


def _accept(pattern, graph: Graph, binding: dict) -> bool:
    externals: dict[int, Ref] = {}
    for k, pop in enumerate(pattern.src):
        node = graph.nodes[binding[k]]
        for position, t in enumerate(pop.inputs):
            ref = node.inputs[position]
            if t.op < 0:
                if externals.setdefault(t.op, ref) != ref:
                    return False
            elif ref != Ref(binding[t.op], t.index):
                return False
    matched = set(binding.values())
    if any(ref.node in matched for ref in externals.values()):
        return False
    mapped_ops = {s.op for s, _ in pattern.mapped}
    for k in range(len(pattern.src)):
        if k in mapped_ops:
            continue
        ref = Ref(binding[k])
        if ref in graph.outputs or any(u.node not in matched for u in graph.ref_uses(ref)):
            return False
    # a mapped op and an external read only by ops that are not that op or its pattern ancestors
    parents = {k: {t.op for t in pop.inputs if t.op >= 0} for k, pop in enumerate(pattern.src)}
    for k in mapped_ops:
        up, stack = {k}, [k]
        while stack:
            for q in parents[stack.pop()]:
                if q not in up:
                    up.add(q)
                    stack.append(q)
        for e, ref in externals.items():
            if any(any(t.op == e for t in pattern.src[i].inputs) for i in up):
                continue
            producer = graph.nodes[ref.node]
            if producer.op not in ("input", "weight") and not (
                    producer.constant and not graph.nodes[binding[k]].constant):
                return False
    return _target_fits(pattern, graph, binding, externals)


def brute_force_locations(pattern, order, graph: Graph, nxg: nx.DiGraph | None = None) -> set[tuple[int, ...]]:
    """Every location of `pattern` in `graph` (node ids in `order` of the pattern's source ops)."""
    nxg = networkx_graph(graph) if nxg is None else nxg
    matcher = nx.algorithms.isomorphism.DiGraphMatcher(
        nxg, _pattern_graph(pattern),
        node_match=lambda g, p: g["op"] == p["op"] and _fits(p["pop"], graph, g["id"]),
        edge_match=lambda g, p: g["slots"] == p["slots"])
    found = set()
    for mapping in matcher.subgraph_monomorphisms_iter():
        binding = {k: n for n, k in mapping.items()}
        if _accept(pattern, graph, binding):
            found.add(tuple(binding[k] for k in order))
    return found


def source_attrs(pop, shapes) -> dict:
    """IR attributes of a node that meets source op `pop`'s constraints on inputs of `shapes`."""
    attrs = dict(pop.attrs)
    if pop.op == "matmul":
        return {"activation": attrs["activation"]}
    if pop.op == "conv2d":
        pads = _pads(attrs["padding"], shapes[0][2:], shapes[1][2:], attrs["stride"])
        return {"stride": attrs["stride"], "pads": pads, "activation": attrs["activation"]}
    if pop.op == "concat":
        return {"axis": attrs["axis"]}
    if pop.op == "transpose":
        return {"perm": attrs["perm"]}
    return {}


def planted_graph(patterns, seed: int, count: int = 5) -> tuple[Graph, list]:
    """A graph made of `count` source instances of randomly chosen patterns (shapes sampled with dimensions 2
    and 3) whose external inputs often reuse earlier tensors of the same shape (inputs, weights, relus of them
    and earlier instances' results), so instances overlap, share operands and chain; some inner tensors are
    also graph outputs. Returns the graph and [(pattern, source node ids)] of the instances."""
    import numpy as np

    from jaxgraph.graph import GraphBuilder
    from jaxgraph.pattern_data import sample_shapes

    rng = np.random.default_rng(seed)
    b = GraphBuilder()
    pool: dict[tuple, list[Ref]] = {}
    made: list[Ref] = []
    read: set[Ref] = set()
    instances = []
    for i in range(count):
        pattern = patterns[int(rng.integers(len(patterns)))]
        shapes = sample_shapes(pattern, rng)
        refs = {}
        for e, shape in shapes.items():
            reuse = pool.get(shape, [])
            if reuse and rng.random() < 0.6:
                refs[(e, 0)] = reuse[int(rng.integers(len(reuse)))]
            else:
                kind = rng.random()
                name = f"t{i}_{-e}"
                value = rng.uniform(-1, 1, shape).astype(np.float32)
                refs[(e, 0)] = (b.weight(name, value) if kind < 0.4 else b.input(name, shape) if kind < 0.8
                                else b.add("relu", [b.input(name, shape)]))
                pool.setdefault(shape, []).append(refs[(e, 0)])
        nodes = []
        for k, pop in enumerate(pattern.src):
            inputs = [refs[tuple(t)] for t in pop.inputs]
            ref = b.add(pop.op, inputs, **source_attrs(pop, [b.shape(r) for r in inputs]))
            read.update(inputs)
            refs[(k, 0)] = ref
            nodes.append(ref.node)
            made.append(ref)
            pool.setdefault(b.shape(ref), []).append(ref)
        instances.append((pattern, nodes))
    outputs = [r for r in made if r not in read or rng.random() < 0.1]
    return b.build({f"y{j}": r for j, r in enumerate(outputs)}), instances


def planted_graphs(patterns, count: int, first_seed: int = 0, outputs: int = 7) -> list[Graph]:
    """`count` planted graphs (`planted_graph` of six instances, seeds from `first_seed` on) with `outputs` graph
    outputs each, so one jitted environment holds them all."""
    graphs, seed = [], first_seed
    while len(graphs) < count:
        graph = planted_graph(patterns, seed, count=6)[0]
        seed += 1
        if len(graph.outputs) == outputs:
            graphs.append(graph)
    return graphs


def mismatches(compiled, seeds) -> tuple[int, int]:
    """(rule x graph pairs where the generic matcher and the brute-force matcher differ, locations found) for
    the `CompiledPattern`s `compiled` over a random soup graph (`random_taso_graph`) and a planted-instance graph
    per seed."""
    from jaxgraph.random_graphs import random_taso_graph

    compiled = list(compiled)
    patterns = [c.pattern for c in compiled]
    rules = [c.rule() for c in compiled]
    differ = found = 0
    for seed in seeds:
        for graph in (random_taso_graph(seed, blocks=8), planted_graph(patterns, seed)[0]):
            nxg = networkx_graph(graph)
            for c, rule in zip(compiled, rules):
                expected = brute_force_locations(c.pattern, c.order, graph, nxg)
                differ += set(rule.find(graph)) != expected
                found += len(expected)
    return differ, found


def assert_equals_brute_force(patterns, seeds=range(6)) -> None:
    """The generic matcher finds exactly the brute-force locations of every pattern on `mismatches`' graphs, and
    finds some."""
    from jaxgraph.patterns import CompiledPattern

    differ, found = mismatches([CompiledPattern(p) for p in patterns], seeds)
    assert differ == 0, f"{differ} rule x graph pairs differ"
    assert found > 0
