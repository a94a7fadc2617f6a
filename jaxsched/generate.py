"""Seeded, offline generators of scheduling problems.

* `random_dag`: Topcuoglu, Hariri and Wu (2002) random graphs: v tasks in about sqrt(v)/alpha levels,
  mean out-degree, communication-to-computation ratio (CCR) and heterogeneity beta.
* `gaussian_elimination`, `fft`, `fork_join`: the classic application graphs, costed with the same
  beta rule.
* `out_tree`, `in_tree`, `chains`: trees (one entry fanning out, or many entries merging into one
  exit) and independent chains, costed with the same rule.
* `cloudsim`: tasks and machines with the DeepSched paper's features (task length, arrival time,
  priority, memory; processors with cores, frequency, memory); execution time derived from them.
* WfCommons workflow recipes live in `jaxsched.workflows` (extra `workflows`).

Every generator takes a `seed` (or a `numpy.random.Generator`) and is deterministic for it.
`integer=True` rounds costs to integers, which makes float32 JAX kernels agree exactly with the
float64 references.
"""

from __future__ import annotations

import math

import numpy as np

from jaxsched.common import arguments
from jaxsched.problem import Problem


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _check_counts(**counts) -> None:
    """Raises ValueError unless every count is an integer >= 1."""
    for name, value in counts.items():
        arguments.integer(name, value, 1)


def _check_finite(**values) -> None:
    """Raises ValueError unless every value is a finite real number (NaN fails every comparison and
    would pass the range checks)."""
    for name, value in values.items():
        arguments.number(name, value)


def _costs(rng, num_tasks, num_edges, num_procs, ccr, beta, mean_comp, integer):
    """Topcuoglu's cost rule: w_i ~ U[0, 2 w], comp[i, p] ~ U[w_i (1 - beta/2), w_i (1 + beta/2)],
    data ~ U[0, 2 CCR w]."""
    _check_finite(ccr=ccr, beta=beta, mean_comp=mean_comp)
    if not 0 <= beta <= 2:
        raise ValueError(f"beta must lie in [0, 2], got {beta}")
    if ccr < 0 or mean_comp <= 0:
        raise ValueError(f"ccr must be >= 0 and mean_comp > 0, got {ccr} and {mean_comp}")
    task_mean = rng.uniform(0, 2 * mean_comp, size=(num_tasks, 1))
    comp = task_mean * rng.uniform(1 - beta / 2, 1 + beta / 2, size=(num_tasks, num_procs))
    data = rng.uniform(0, 2 * ccr * mean_comp, size=num_edges)
    if integer:
        comp, data = np.maximum(np.round(comp), 1.0), np.round(data)
    return comp, data


def random_dag(
    num_tasks: int,
    num_procs: int,
    *,
    alpha: float = 1.0,
    out_degree: float = 3.0,
    ccr: float = 1.0,
    beta: float = 1.0,
    mean_comp: float = 50.0,
    jump: int = 2,
    integer: bool = False,
    seed=0,
) -> Problem:
    """A Topcuoglu random DAG.

    Levels: height = max(1, round(sqrt(v) / alpha)), every level non-empty, the other tasks spread
    uniformly (mean width alpha * sqrt(v)). Edges: each task not in the last level draws
    U{1, ..., 2 * out_degree - 1} successors (mean `out_degree`) among the tasks of the next `jump`
    levels (duplicates merged); a task left without predecessors gets one from the level above.
    Task indices are shuffled so that index order is not a topological order.
    """
    _check_counts(num_tasks=num_tasks, num_procs=num_procs, jump=jump)
    _check_finite(alpha=alpha, out_degree=out_degree)
    if alpha <= 0 or out_degree < 1 or jump < 1:
        raise ValueError(f"need alpha > 0, out_degree >= 1 and jump >= 1, got {alpha}, {out_degree}, {jump}")
    rng = _rng(seed)
    src, dst = _layered_edges(rng, num_tasks, alpha, out_degree, jump)
    comp, data = _costs(rng, num_tasks, src.size, num_procs, ccr, beta, mean_comp, integer)
    return _shuffled(rng, comp=comp, src=src, dst=dst, data=data)


def _layered_edges(rng, num_tasks, alpha, out_degree, jump):
    """Edges of a Topcuoglu layered DAG over tasks 0..v-1 sorted by level (see `random_dag`)."""
    height = min(num_tasks, max(1, round(math.sqrt(num_tasks) / alpha)))
    level = np.sort(np.concatenate([np.arange(height), rng.integers(0, height, num_tasks - height)]))
    level_start = np.searchsorted(level, np.arange(height + 1))
    if height == 1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    parents = np.flatnonzero(level < height - 1)
    degree = rng.integers(1, max(2, round(2 * out_degree)), size=parents.size)
    src = np.repeat(parents, degree)
    lo = level_start[level[src] + 1]
    hi = level_start[np.minimum(level[src] + 1 + jump, height)]
    dst = lo + (rng.random(src.size) * (hi - lo)).astype(np.int64)
    orphans = np.setdiff1d(np.arange(level_start[1], num_tasks), dst)
    above_lo, above_hi = level_start[level[orphans] - 1], level_start[level[orphans]]
    src = np.concatenate([src, above_lo + (rng.random(orphans.size) * (above_hi - above_lo)).astype(np.int64)])
    dst = np.concatenate([dst, orphans])
    pairs = np.unique(src * num_tasks + dst)
    return pairs // num_tasks, pairs % num_tasks


def _shuffled(rng, **arrays) -> Problem:
    """Builds a Problem with task indices randomly permuted (so index order is not topological)."""
    relabel = rng.permutation(arrays["comp"].shape[0])
    inverse = np.argsort(relabel)
    for name, value in arrays.items():
        if name in ("src", "dst"):
            arrays[name] = relabel[value]
        elif name.startswith("task_") or name == "comp":
            arrays[name] = value[inverse]
    return Problem(**arrays)


def _application(rng, src, dst, num_procs, ccr, beta, mean_comp, integer, num_tasks=None) -> Problem:
    """Costs `src` -> `dst` by `_costs`; tasks 0..max index unless `num_tasks` says otherwise."""
    _check_counts(num_procs=num_procs)
    src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
    if num_tasks is None:
        num_tasks = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    comp, data = _costs(rng, num_tasks, src.size, num_procs, ccr, beta, mean_comp, integer)
    return Problem(comp=comp, src=src, dst=dst, data=data)


def gaussian_elimination(
    matrix_size: int, num_procs: int, *, ccr=1.0, beta=1.0, mean_comp=50.0, integer=False, seed=0
) -> Problem:
    """Gaussian elimination DAG (Topcuoglu et al. Fig. 9a): (m^2 + m - 2) / 2 tasks for matrix size m.

    Step k has a pivot task (k, k) feeding updates (k, j), j > k; update (k, j) feeds step k + 1's
    task on column j (the next pivot when j = k + 1).
    """
    _check_counts(matrix_size=matrix_size)
    if matrix_size < 2:
        raise ValueError(f"matrix_size must be >= 2, got {matrix_size}")
    index, src, dst = {}, [], []
    for k in range(1, matrix_size):
        for j in range(k, matrix_size + 1):
            index[k, j] = len(index)
    for k in range(1, matrix_size):
        for j in range(k + 1, matrix_size + 1):
            src.append(index[k, k])
            dst.append(index[k, j])
            if k + 1 < matrix_size:
                src.append(index[k, j])
                dst.append(index[k + 1, j])
    return _application(_rng(seed), src, dst, num_procs, ccr, beta, mean_comp, integer)


def fft(points: int, num_procs: int, *, ccr=1.0, beta=1.0, mean_comp=50.0, integer=False, seed=0) -> Problem:
    """FFT DAG (Topcuoglu et al. Fig. 9b): 2m - 1 recursive-call tasks in a binary tree, then
    log2(m) butterfly stages of m tasks; m must be a power of two."""
    _check_counts(points=points)
    if points < 2 or points & (points - 1):
        raise ValueError(f"points must be a power of two >= 2, got {points}")
    src, dst = [], []
    for parent in range(points - 1):  # heap-ordered call tree: children 2i+1, 2i+2
        src += [parent, parent]
        dst += [2 * parent + 1, 2 * parent + 2]
    previous = list(range(points - 1, 2 * points - 1))  # the leaves
    next_id = 2 * points - 1
    stage_span = 1
    while stage_span < points:
        stage = list(range(next_id, next_id + points))
        for i in range(points):
            for j in (i, i ^ stage_span):
                src.append(previous[j])
                dst.append(stage[i])
        previous, next_id, stage_span = stage, next_id + points, stage_span * 2
    return _application(_rng(seed), src, dst, num_procs, ccr, beta, mean_comp, integer)


def fork_join(
    width: int, stages: int, num_procs: int, *, ccr=1.0, beta=1.0, mean_comp=50.0, integer=False, seed=0
) -> Problem:
    """Fork-join DAG: an entry task, then `stages` times (fork into `width` tasks, join into one)."""
    _check_counts(width=width, stages=stages)
    src, dst = [], []
    join = 0
    for _ in range(stages):
        workers = range(join + 1, join + 1 + width)
        next_join = join + 1 + width
        for w in workers:
            src += [join, w]
            dst += [w, next_join]
        join = next_join
    return _application(_rng(seed), src, dst, num_procs, ccr, beta, mean_comp, integer)


def _tree_parents(rng, num_tasks: int, branching: int | None) -> np.ndarray:
    """[T - 1] parent of tasks 1..T-1: heap order (i - 1) // branching, or with `branching=None`
    a random recursive tree (each task's parent uniform among the tasks before it)."""
    if branching is None:
        return (rng.random(num_tasks - 1) * np.arange(1, num_tasks)).astype(np.int64)
    _check_counts(branching=branching)
    return (np.arange(1, num_tasks) - 1) // branching


def out_tree(
    num_tasks: int, num_procs: int, *, branching: int | None = 2, ccr=1.0, beta=1.0, mean_comp=50.0,
    integer=False, seed=0,
) -> Problem:
    """Out-tree: task 0 is the one entry, every other task has one predecessor (its parent). With an
    integer `branching` the tree is complete (task i's parent is (i - 1) // branching); with None it
    is a random recursive tree, seeded. Edges go parent -> child."""
    _check_counts(num_tasks=num_tasks)
    rng = _rng(seed)
    parents = _tree_parents(rng, num_tasks, branching)
    return _application(rng, parents, np.arange(1, num_tasks), num_procs, ccr, beta, mean_comp, integer, num_tasks)


def in_tree(
    num_tasks: int, num_procs: int, *, branching: int | None = 2, ccr=1.0, beta=1.0, mean_comp=50.0,
    integer=False, seed=0,
) -> Problem:
    """In-tree: `out_tree`'s shape with every edge reversed (child -> parent), so task 0 is the one
    exit and each task feeds exactly one successor."""
    _check_counts(num_tasks=num_tasks)
    rng = _rng(seed)
    parents = _tree_parents(rng, num_tasks, branching)
    return _application(rng, np.arange(1, num_tasks), parents, num_procs, ccr, beta, mean_comp, integer, num_tasks)


def chains(
    num_chains: int, length: int, num_procs: int, *, ccr=1.0, beta=1.0, mean_comp=50.0, integer=False, seed=0
) -> Problem:
    """`num_chains` independent chains of `length` tasks: chain c is tasks c * length .. (c + 1) * length - 1,
    each feeding the next."""
    _check_counts(num_chains=num_chains, length=length)
    tasks = np.arange(num_chains * length).reshape(num_chains, length)
    src, dst = tasks[:, :-1].ravel(), tasks[:, 1:].ravel()
    return _application(_rng(seed), src, dst, num_procs, ccr, beta, mean_comp, integer, tasks.size)


def cloudsim(
    num_tasks: int,
    num_procs: int,
    *,
    alpha: float = 1.0,
    out_degree: float = 3.0,
    ccr: float = 1.0,
    arrival_rate: float | None = None,
    seed=0,
) -> Problem:
    """A cloud workload with the DeepSched paper's features, in the style of CloudSim datasets.

    Processors (VMs): cores in {1, 2, 4, 8, 16}, per-core speed U[1000, 3000] MIPS, memory in
    {2, 4, 8, 16, 32} GB. Tasks (cloudlets): length U[1000, 40000] million instructions, parallel
    fraction U[0, 0.9], memory U[0.25, 16] GB, priority in {1, ..., 5}, Poisson arrivals (default
    rate: one per mean execution time divided by the number of processors). Execution time =
    length / (speed * Amdahl speed-up on the cores), doubled when the task's memory exceeds the
    processor's. Dependencies: a Topcuoglu layered DAG (alpha, out_degree); transfer times
    U[0, 2 CCR mean execution time].
    """
    _check_counts(num_tasks=num_tasks, num_procs=num_procs)
    _check_finite(alpha=alpha, out_degree=out_degree, ccr=ccr)
    if alpha <= 0 or out_degree < 1 or ccr < 0:
        raise ValueError(f"need alpha > 0, out_degree >= 1 and ccr >= 0, got {alpha}, {out_degree}, {ccr}")
    if arrival_rate is not None:
        _check_finite(arrival_rate=arrival_rate)
        if arrival_rate <= 0:
            raise ValueError(f"arrival_rate must be positive, got {arrival_rate}")
    rng = _rng(seed)
    cores = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], size=num_procs)
    speed = rng.uniform(1000, 3000, size=num_procs)
    proc_memory = rng.choice([2.0, 4.0, 8.0, 16.0, 32.0], size=num_procs)
    length = rng.uniform(1000, 40000, size=num_tasks)
    parallel = rng.uniform(0, 0.9, size=(num_tasks, 1))
    task_memory = rng.uniform(0.25, 16, size=num_tasks)
    priority = rng.integers(1, 6, size=num_tasks).astype(np.float64)
    amdahl = 1.0 / ((1.0 - parallel) + parallel / cores)  # [T, P]
    comp = length[:, None] / (speed * amdahl)
    comp *= np.where(task_memory[:, None] > proc_memory, 2.0, 1.0)
    src, dst = _layered_edges(rng, num_tasks, alpha, out_degree, 2)
    mean_comp = float(comp.mean())
    data = rng.uniform(0, 2 * ccr * mean_comp, size=src.size)
    rate = arrival_rate if arrival_rate is not None else num_procs / mean_comp
    arrival = np.cumsum(rng.exponential(1.0 / rate, size=num_tasks))  # in level order
    arrival -= arrival[0]
    return _shuffled(
        rng,
        comp=comp,
        src=src,
        dst=dst,
        data=data,
        task_arrival=arrival,
        task_priority=priority,
        task_memory=task_memory,
        proc_cores=cores,
        proc_frequency=speed,
        proc_memory=proc_memory,
    )
