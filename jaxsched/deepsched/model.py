"""DeepSched network (paper section III-D and IV-C) in Flax Linen, on one padded problem.

Machine encoder: Conv1D over processors + one dense layer on (cores, frequency, memory[, speed]).
Task encoder: one bidirectional GRU layer over the tasks in sequence + one dense layer.
Fusion by stacking: every (task, processor) pair gets the task's embedding, the processor's, a
summary of all processors and the pair's own execution time, stacked as channels.
Classifier: Conv1D (kernel 1) along the processor axis of the stack, one logit per processor.
Regressor: the same over the stack, (start, finish) / time_scale if the task ran on that processor.

Where the paper is loose we chose what keeps padding exact and the network size-agnostic: weights
are shared across processors (the public code gives each processor its own output channel instead),
so masked processors are exactly excluded and no parameter depends on the number of tasks or
processors; the classifier has one hidden layer, because a single linear layer over a stack cannot
let the task change the ranking of processors (the task's term is the same for every processor and
cancels in the softmax). Variants (`ModelConfig.variant`): "paper" sees no edges and reads tasks in
arrival order; "dag" adds DAG features and reads tasks in HEFT's upward-rank order, so the GRU sees
them in the order HEFT places them; "gnn" adds message passing over the edges (jraph).
"""

from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import jraph

from jaxsched.deepsched import _feedback as feedback
from jaxsched.deepsched._feedback import STATE_FEATURES
from jaxsched.deepsched.configs import ModelConfig
from jaxsched.deepsched.features import PAPER_PROC_FEATURES, PAPER_TASK_FEATURES, Features, assert_features

MASKED_LOGIT = -1e9  # logit of a padded processor: exp underflows to exactly 0 in float32
# XLA options for functions that run once (parameter initialisation): without backend optimisation
# the CPU compiler is several times faster (20 s -> 5 s for the GRU's initialisers on 2 cores), and
# their run time does not matter.
UNOPTIMISED = {"xla_backend_optimization_level": 0}
PRIOR = "eft_sharpness"  # the feedback variant's parameter k of its earliest-finish prior


class Prediction(NamedTuple):
    logits: jax.Array  # [T, P] processor scores, MASKED_LOGIT at padded processors
    times: jax.Array  # [T, 2] (start, finish) / time_scale on the given (or chosen) processor


def _masked(x: jax.Array, mask: jax.Array) -> jax.Array:
    """Zeros the rows of x [N, ...] where mask [N] is False."""
    return jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)), x, jnp.zeros((), x.dtype))


class MachineEncoder(nn.Module):
    """[P, F] processor features -> [P, H] embeddings and an [H + 1] summary (masked mean, and the
    log of the number of processors, which sets how much tasks compete for them)."""

    hidden: int

    @nn.compact
    def __call__(self, proc: jax.Array, proc_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = nn.relu(nn.Conv(self.hidden, kernel_size=(1,), name="conv")(_masked(proc, proc_mask)))
        x = _masked(nn.relu(nn.Dense(self.hidden, name="dense")(x)), proc_mask)
        count = proc_mask.sum().astype(x.dtype)
        mean = x.sum(axis=0) / jnp.maximum(count, 1)
        return x, jnp.concatenate([mean, jnp.log1p(count)[None]])


class MinGRU(nn.Module):
    """A GRU whose gates depend on the input only (Feng et al. 2024, "Were RNNs all we needed?"):
    h_t = (1 - z_t) h_(t-1) + z_t g(x_t), a linear recurrence computed by a parallel associative scan
    in O(log T) depth instead of T sequential steps. Masked steps are identities, so padding at the
    end changes nothing in either direction."""

    hidden: int
    reverse: bool = False

    @nn.compact
    def __call__(self, sequence: jax.Array, mask: jax.Array) -> jax.Array:
        gate = nn.sigmoid(nn.Dense(self.hidden, name="gate")(sequence)) * mask[:, None]
        candidate = nn.Dense(self.hidden, name="candidate")(sequence)

        def combine(earlier, later):
            return earlier[0] * later[0], later[0] * earlier[1] + later[1]

        if self.reverse:
            combine = lambda later, earlier: (earlier[0] * later[0], earlier[0] * later[1] + earlier[1])  # noqa: E731
        _, states = jax.lax.associative_scan(combine, (1 - gate, gate * candidate), reverse=self.reverse)
        return states


class TaskEncoder(nn.Module):
    """[T, F] task features read in `order` by a bidirectional recurrent layer -> [T, H] in task
    index order. recurrence: "gru" (the paper's GRU, T sequential steps) or "mingru" (`MinGRU`)."""

    hidden: int
    recurrence: str = "gru"

    @nn.compact
    def __call__(self, task: jax.Array, order: jax.Array, task_mask: jax.Array) -> jax.Array:
        sequence = task[order]  # real tasks come first in `order`
        if self.recurrence == "gru":
            gru = nn.Bidirectional(nn.RNN(nn.GRUCell(self.hidden)), nn.RNN(nn.GRUCell(self.hidden)), name="bigru")
            states = gru(sequence[None], seq_lengths=task_mask.sum()[None])[0]  # [T, 2H]
        else:
            mask = task_mask[order].astype(sequence.dtype)
            forward = MinGRU(self.hidden, name="forward")(sequence, mask)
            backward = MinGRU(self.hidden, reverse=True, name="backward")(sequence, mask)
            states = jnp.concatenate([forward, backward], axis=1)
        x = nn.relu(nn.Dense(self.hidden, name="dense")(states))
        return _masked(jnp.zeros_like(x).at[order].set(x), task_mask)


class GraphEncoder(nn.Module):
    """Message passing over the DAG's edges: each layer sends parent -> child and child -> parent
    messages (mean over each direction) and updates the task embeddings residually."""

    hidden: int
    layers: int

    @nn.compact
    def __call__(self, nodes: jax.Array, features: Features) -> jax.Array:
        edges = {"data": features.edge_data[:, None], "mask": features.edge_mask.astype(nodes.dtype)[:, None]}
        for layer in range(self.layers):
            down = nn.Dense(self.hidden, name=f"down_{layer}")
            up = nn.Dense(self.hidden, name=f"up_{layer}")
            update = nn.Dense(self.hidden, name=f"update_{layer}")

            def edge_fn(edge, sender, receiver, _globals, down=down, up=up):
                return {
                    "down": nn.relu(down(jnp.concatenate([sender, edge["data"]], axis=-1))) * edge["mask"],
                    "up": nn.relu(up(jnp.concatenate([receiver, edge["data"]], axis=-1))) * edge["mask"],
                    "data": edge["data"],
                    "mask": edge["mask"],
                }

            def node_fn(node, sent, received, _globals, update=update):
                from_parents = received["down"] / jnp.maximum(received["mask"], 1)
                from_children = sent["up"] / jnp.maximum(sent["mask"], 1)
                return node + nn.relu(update(jnp.concatenate([node, from_parents, from_children], axis=-1)))

            graph = jraph.GraphsTuple(
                nodes=nodes,
                edges=edges,
                senders=features.edge_src,
                receivers=features.edge_dst,
                n_node=jnp.array([nodes.shape[0]]),
                n_edge=jnp.array([features.edge_src.shape[0]]),
                globals=None,
            )
            graph = jraph.GraphNetwork(update_edge_fn=edge_fn, update_node_fn=node_fn)(graph)
            nodes, edges = _masked(graph.nodes, features.task_mask), graph.edges
        return nodes


def pair_features(comp: jax.Array, proc_mask: jax.Array) -> jax.Array:
    """[T, P, 2]: execution time, and its excess over the task's fastest processor relative to the
    task's mean time (0 on the fastest processor), both 0 on padded processors."""
    real = proc_mask[None, :]
    fastest = jnp.where(real, comp, jnp.inf).min(axis=1, keepdims=True)
    mean = comp.sum(axis=1, keepdims=True) / jnp.maximum(proc_mask.sum(), 1).astype(comp.dtype)
    excess = jnp.where(real, (comp - fastest) / (mean + 1e-6), jnp.zeros((), comp.dtype))
    return jnp.stack([comp, excess], axis=-1)


_EFT_EXCESS = STATE_FEATURES.index("eft_excess")


class Encoding(NamedTuple):
    """What the network computes once per problem, before any processor is chosen."""

    logits: jax.Array  # [T, P] processor scores without feedback, MASKED_LOGIT at padded processors
    state_weights: jax.Array  # [T, len(STATE_FEATURES)] weight of each state feature (feedback variant)
    tasks: jax.Array  # [T, H]
    machines: jax.Array  # [P, H]


class DeepSchedNet(nn.Module):
    """Processor logits for every (task, processor) pair and start/finish predictions of one problem.

    The stack of a pair holds the task embedding u_t, the processor embedding v_p, their product and
    the pair features x_tp (`pair_features`). The classifier is a linear kernel-1 Conv1D along the
    processor axis of that stack, with the weights of the pair features conditioned on the task:
    logit_tp = w . (u_t * v_p) + a(u_t) . x_tp + c . v_p. Computed as a matrix product, it costs a
    few operations per pair, which keeps 10,000 tasks x 188 processors cheap.

    The "feedback" variant adds (b(u_t) - k e) . s_tp, where s_tp are the `feedback.state_features`
    of the earlier decisions and k e a learned prior on the earliest-finish excess (k starts at
    `ModelConfig.eft_prior`): before training it prefers the processor that finishes the task first,
    as HEFT does. The regressor is a small Conv1D over the tasks' stacks at one processor per task:
    HEFT's when training, the chosen one when decoding.
    """

    config: ModelConfig

    def setup(self):
        hidden = self.config.hidden
        self.machine_encoder = MachineEncoder(hidden)
        self.machine_context = nn.Dense(hidden)
        self.task_encoder = TaskEncoder(hidden, self.config.recurrence)
        if self.config.variant == "gnn":
            self.graph_encoder = GraphEncoder(hidden, self.config.graph_layers)
        self.classifier_product = nn.Dense(hidden, use_bias=False)
        self.classifier_pair = nn.Dense(2)
        self.classifier_proc = nn.Dense(1, use_bias=False)
        if self.config.variant == "feedback":
            self.classifier_state = nn.Dense(len(STATE_FEATURES))
            self.eft_sharpness = self.param(PRIOR, nn.initializers.constant(self.config.eft_prior), ())
        self.regressor_hidden = nn.Conv(hidden, kernel_size=(1,))
        self.regressor_out = nn.Conv(2, kernel_size=(1,))

    def encode(self, features: Features) -> Encoding:
        """Everything computed once per problem (see `Encoding`)."""
        assert_features(features)
        dag = self.config.variant != "paper"
        task = features.task if dag else features.task[:, : len(PAPER_TASK_FEATURES)]
        proc = features.proc if dag else features.proc[:, : len(PAPER_PROC_FEATURES)]
        order = features.rank_order if dag else features.arrival_order
        machines, machine_summary = self.machine_encoder(proc, features.proc_mask)
        context = self.machine_context(machine_summary)
        task = jnp.concatenate([task, jnp.broadcast_to(context, task.shape[:1] + context.shape)], axis=1)
        tasks = self.task_encoder(task, order, features.task_mask)
        if self.config.variant == "gnn":
            tasks = self.graph_encoder(tasks, features)
        pairs = pair_features(features.comp, features.proc_mask)  # [T, P, 2]
        logits = (
            self.classifier_product(tasks) @ machines.T
            + jnp.einsum("tpf,tf->tp", pairs, self.classifier_pair(tasks))
            + self.classifier_proc(machines)[:, 0][None, :]
        )
        logits = jnp.where(features.proc_mask[None, :], logits, jnp.asarray(MASKED_LOGIT, logits.dtype))
        if self.config.variant == "feedback":
            prior = -self.eft_sharpness * (jnp.arange(len(STATE_FEATURES)) == _EFT_EXCESS).astype(tasks.dtype)
            state_weights = self.classifier_state(tasks) + prior[None, :]
        else:
            state_weights = jnp.zeros((tasks.shape[0], len(STATE_FEATURES)), tasks.dtype)
        return Encoding(logits, state_weights, tasks, machines)

    def regress(self, features: Features, encoding: Encoding, proc: jax.Array) -> jax.Array:
        """[T, 2] predicted (start, finish) / time_scale of each task on processor `proc[t]`."""
        pairs = pair_features(features.comp, features.proc_mask)
        chosen = jnp.take_along_axis(pairs, proc[:, None, None], axis=1)[:, 0]  # [T, 2]
        stack = jnp.concatenate([encoding.tasks, encoding.machines[proc], chosen], axis=1)
        return _masked(self.regressor_out(nn.relu(self.regressor_hidden(stack))), features.task_mask)

    def __call__(self, features: Features, proc: jax.Array | None = None) -> Prediction:
        """Logits and times given every task's processor `proc` (teacher forcing), or the greedy
        decision when None."""
        encoding = self.encode(features)
        stateful = self.config.variant == "feedback"
        if proc is None:
            if stateful:
                proc = feedback.decode(features, encoding.logits, encoding.state_weights, None, jnp.ones(()))
            else:
                proc = jnp.argmax(encoding.logits, axis=1)
        logits = encoding.logits
        if stateful:
            states = feedback.teacher_state(features, proc)
            logits = logits + jnp.einsum("tpf,tf->tp", states, encoding.state_weights)
        return Prediction(logits=logits, times=self.regress(features, encoding, proc))

    def sample(self, features: Features, key: jax.Array, temperature: jax.Array, samples: int) -> jax.Array:
        """[samples, T] processor assignments: row 0 the greedy one, the others drawn from the softmax
        (one task at a time, seeing the earlier draws, in the feedback variant)."""
        encoding = self.encode(features)
        keys = jax.random.split(key, samples - 1)
        if self.config.variant == "feedback":

            def run(key):
                return feedback.decode(features, encoding.logits, encoding.state_weights, key, temperature)

            greedy, drawn = run(None), jax.vmap(run)(keys)
        else:
            greedy = jnp.argmax(encoding.logits, axis=1).astype(jnp.int32)
            drawn = jax.vmap(lambda k: jax.random.categorical(k, encoding.logits / temperature, axis=1))(keys)
        return jnp.concatenate([greedy[None], drawn.astype(jnp.int32)])


def eft_rule_params(params, eft_prior: float):
    """`params` of a feedback network reduced to its prior: every learned weight zero and the
    earliest-finish weight `eft_prior`, so the network places each task on the processor that
    finishes it first given the earlier decisions (HEFT's rule on the partial schedule): the baseline
    that training has to improve on."""
    if PRIOR not in params["params"]:
        raise ValueError("the EFT rule is the feedback variant's prior; these are another variant's parameters")
    return jax.tree_util.tree_map_with_path(
        lambda path, x: jnp.full_like(x, eft_prior) if path[-1].key == PRIOR else jnp.zeros_like(x), params
    )
