"""Small random problems for tests: integer costs (exact in float32), zero costs included, random
task numbering, optional bandwidths (some of them instant links) and release times."""

import numpy as np

from jaxsched import Problem


def random_problem(seed, max_tasks=12, max_procs=4, bandwidth=False, arrival=False, instant=False) -> Problem:
    """With `instant` (implies `bandwidth`), each link is instant (bandwidth inf) with probability 0.3."""
    rng = np.random.default_rng(seed)
    num_tasks, num_procs = int(rng.integers(1, max_tasks + 1)), int(rng.integers(1, max_procs + 1))
    order = rng.permutation(num_tasks)
    pairs = {(int(order[i]), int(order[j])) for j in range(1, num_tasks) for i in range(j) if rng.random() < 0.3}
    src, dst = (np.array(x, dtype=np.int64) for x in zip(*sorted(pairs))) if pairs else (np.zeros(0, int),) * 2
    return Problem(
        comp=rng.integers(0, 9, (num_tasks, num_procs)).astype(float),
        src=src,
        dst=dst,
        data=rng.integers(0, 9, len(src)).astype(float),
        bandwidth=_links(rng, num_procs, instant) if bandwidth or instant else None,
        task_arrival=rng.integers(0, 20, num_tasks).astype(float) if arrival else None,
    )


def _links(rng, num_procs, instant):
    links = rng.integers(1, 4, (num_procs, num_procs)).astype(float)
    if instant:
        links[rng.random((num_procs, num_procs)) < 0.3] = np.inf
    return links


def topcuoglu_example() -> Problem:
    """The 10-task, 3-processor DAG of Topcuoglu, Hariri and Wu (2002), Fig. 2 (tasks renumbered from 0)."""
    comp = [[14, 16, 9], [13, 19, 18], [11, 13, 19], [13, 8, 17], [12, 13, 10],
            [13, 16, 9], [7, 15, 11], [5, 11, 14], [18, 12, 20], [21, 7, 16]]
    edges = [(1, 2, 18), (1, 3, 12), (1, 4, 9), (1, 5, 11), (1, 6, 14), (2, 8, 19), (2, 9, 16), (3, 7, 23),
             (4, 8, 27), (4, 9, 23), (5, 9, 13), (6, 8, 15), (7, 10, 17), (8, 10, 11), (9, 10, 13)]
    src, dst, data = zip(*edges)
    return Problem(np.array(comp, float), np.array(src) - 1, np.array(dst) - 1, np.array(data, float))
