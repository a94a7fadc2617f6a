"""Seeded, offline generators of scheduling problems.

* `random_dag`: Topcuoglu, Hariri and Wu (2002) random graphs: v tasks in about sqrt(v)/alpha levels,
  mean out-degree, communication-to-computation ratio (CCR) and heterogeneity beta.
* `gaussian_elimination`, `fft`, `fork_join`: the classic application graphs, costed with the same
  beta rule.
* `cloudsim`: tasks and machines with the DeepSched paper's features (task length, arrival time,
  priority, memory; processors with cores, frequency, memory); execution time derived from them.

Every generator takes a `seed` (or a `numpy.random.Generator`) and is deterministic for it.
`integer=True` rounds costs to integers, which makes float32 JAX kernels agree exactly with the
float64 references.
"""

from __future__ import annotations

import math

import numpy as np

from jaxsched.problem import Problem


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _costs(rng, num_tasks, num_edges, num_procs, ccr, beta, mean_comp, integer):
    """Topcuoglu's cost rule: w_i ~ U[0, 2 w], comp[i, p] ~ U[w_i (1 - beta/2), w_i (1 + beta/2)],
    data ~ U[0, 2 CCR w]."""
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
    if num_tasks < 1 or num_procs < 1:
        raise ValueError(f"need num_tasks >= 1 and num_procs >= 1, got {num_tasks} and {num_procs}")
    if alpha <= 0 or out_degree < 1 or jump < 1:
        raise ValueError(f"need alpha > 0, out_degree >= 1 and jump >= 1, got {alpha}, {out_degree}, {jump}")
    rng = _rng(seed)
    height = min(num_tasks, max(1, round(math.sqrt(num_tasks) / alpha)))
    level = np.sort(np.concatenate([np.arange(height), rng.integers(0, height, num_tasks - height)]))
    level_start = np.searchsorted(level, np.arange(height + 1))  # tasks sorted by level
    src = np.zeros(0, np.int64)
    dst = np.zeros(0, np.int64)
    if height > 1:
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
        src, dst = pairs // num_tasks, pairs % num_tasks
    comp, data = _costs(rng, num_tasks, src.size, num_procs, ccr, beta, mean_comp, integer)
    relabel = rng.permutation(num_tasks)
    return Problem(comp=comp[np.argsort(relabel)], src=relabel[src], dst=relabel[dst], data=data)
