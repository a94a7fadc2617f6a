"""Run any graph in JAX, so that every rewrite can be checked numerically.

Constant subgraphs (weights and the weight-only ops that substitutions create) are folded into
weights first (`reference.fold_constants`, as TASO preprocesses weights before running an optimized
graph); the remaining ops run in one jitted function per graph, compiled once and cached for the
life of the graph object.
"""

from __future__ import annotations

import weakref
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxgraph.graph import Graph, Node, Ref
from jaxgraph.ops import OPS
from jaxgraph.reference import fold_constants

_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _run_node(node: Node, args: list) -> tuple:
    out = OPS[node.op].impl(node.attrs, *args)
    return out if isinstance(out, tuple) else (out,)


class _Program:
    """A graph lowered to a list of JAX calls over folded weights."""

    def __init__(self, graph: Graph) -> None:
        folded = fold_constants(graph)
        self.graph = graph
        self.inputs = {folded.nodes[i].name: i for i in folded.inputs}
        self.steps = [(i, folded.nodes[i]) for i in folded.order if folded.nodes[i].op not in ("input", "weight")]
        self.weight_values = {i: n.value for i, n in folded.nodes.items() if n.op == "weight"}
        self.outputs = folded.outputs
        self.output_names = folded.output_names
        self._weights = None
        self.jitted = jax.jit(self.run)

    @property
    def weights(self) -> dict[int, jax.Array]:
        if self._weights is None:
            self._weights = {i: jnp.asarray(v) for i, v in self.weight_values.items()}
        return self._weights

    def run(self, weights: Mapping[int, jax.Array], inputs: Mapping[int, jax.Array]) -> dict[str, jax.Array]:
        env: dict[Ref, jax.Array] = {Ref(i): v for i, v in weights.items()}
        env.update((Ref(i), v) for i, v in inputs.items())
        for node_id, node in self.steps:
            for k, value in enumerate(_run_node(node, [env[r] for r in node.inputs])):
                env[Ref(node_id, k)] = value
        return {name: env[r] for name, r in zip(self.output_names, self.outputs)}


def _program(graph: Graph) -> _Program:
    if graph not in _PROGRAMS:
        _PROGRAMS[graph] = _Program(graph)
    return _PROGRAMS[graph]


def execute(graph: Graph, inputs: Mapping[str, object], *, jit: bool = True) -> dict[str, jax.Array]:
    """Run `graph` on `inputs` (by input name); returns outputs by name.

    `jit=False` dispatches op by op, which avoids one XLA compilation per graph when many
    rewritten graphs are each run once (the rewrite tests).
    """
    program = _program(graph)
    by_id = {program.inputs[name]: jnp.asarray(v) for name, v in graph.check_inputs(inputs).items()}
    run = program.jitted if jit else program.run
    return run(program.weights, by_id)


def runner(graph: Graph, inputs: Mapping[str, object]) -> Callable[[], dict[str, jax.Array]]:
    """A zero-argument function running the jitted graph on fixed device inputs (for timing)."""
    program = _program(graph)
    by_id = {program.inputs[name]: jax.device_put(v) for name, v in graph.check_inputs(inputs).items()}
    weights = program.weights
    return lambda: program.jitted(weights, by_id)


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal float32 inputs for every graph input."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in graph.input_shapes.items()}
