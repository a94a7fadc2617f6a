"""Small random problems for tests: integer costs (exact in float32), zero costs included, random
task numbering, optional bandwidths (some of them instant links) and release times."""

import numpy as np

from jaxsched import Problem
from jaxsched.generate import cloudsim, gaussian_elimination, random_dag


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


# CPOP (Topcuoglu, Hariri and Wu 2002, Sec. 4.2) on `topcuoglu_example`, worked by hand (tasks n1..n10 are
# indices 0..9, processors P1..P3 are 0..2). Mean costs: n1 13, n2 50/3, n3 43/3, n4 38/3, n5 35/3, n6 38/3,
# n7 11, n8 10, n9 50/3, n10 44/3; mean communication = data (unit links).
# Upward ranks: n10 14.667, n9 16.667+13+14.667 = 44.333, n8 10+11+14.667 = 35.667, n7 11+17+14.667 = 42.667,
#   n6 12.667+15+35.667 = 63.333, n5 11.667+13+44.333 = 69, n4 12.667+max(27+35.667, 23+44.333) = 80,
#   n3 14.333+23+42.667 = 80, n2 16.667+max(19+35.667, 16+44.333) = 77, n1 13+max(18+77, 12+80, 9+80, 11+69,
#   14+63.333) = 108.
# Downward ranks: n1 0, n2 13+18 = 31, n3 25, n4 22, n5 24, n6 27, n7 25+14.333+23 = 62.333,
#   n8 max(31+16.667+19, 22+12.667+27, 27+12.667+15) = 66.667, n9 max(31+16.667+16, 22+12.667+23, 24+11.667+13)
#   = 63.667, n10 max(62.333+11+17, 66.667+10+11, 63.667+16.667+13) = 93.333.
# Priorities (sum): n1 108, n2 108, n3 105, n4 102, n5 93, n6 90.333, n7 105, n8 102.333, n9 108, n10 108.
# Critical path n1 n2 n9 n10 (108); on P2 it costs 16+19+12+7 = 54 (P1 66, P3 63): pinned to P2.
# Steps (highest-priority ready task; critical-path tasks on P2, others at least insertion-based finish time):
#   n1  -> P2 [0, 16].
#   n2  -> P2 (pinned): input from n1 on P2 at 16 -> [16, 35].
#   n3  (105): ready P1 16+12 = 28, P2 16, P3 28; finish P1 28+11 = 39, P2 35+13 = 48, P3 28+19 = 47 -> P1 [28, 39].
#   n7  (105, ready now): ready P1 39, P2/P3 39+23 = 62; finish P1 46, P2 77, P3 73 -> P1 [39, 46].
#   n4  (102): ready P1 25, P2 16, P3 25; P1's gap [0, 28) too short (25+13 > 28): 46+13 = 59; P2 35+8 = 43;
#       P3 25+17 = 42 -> P3 [25, 42].
#   n5  (93): ready P1 27, P2 16, P3 27; finish P1 46+12 = 58, P2 35+13 = 48, P3 42+10 = 52 -> P2 [35, 48].
#   n9  (108, ready now; pinned): inputs n2 on P2 at 35, n4 42+23 = 65, n5 on P2 at 48 -> P2 [65, 77].
#   n6  (90.333): ready P1 30, P2 16, P3 30; finish P1 46+13 = 59, P2 in the gap [48, 65): 48+16 = 64,
#       P3 42+9 = 51 -> P3 [42, 51].
#   n8  (102.333): inputs n2 (P2, 35, 19), n4 (P3, 42, 27), n6 (P3, 51, 15): ready P1 69, P2 69, P3 54;
#       finish P1 74, P2 77+11 = 88, P3 54+14 = 68 -> P3 [54, 68].
#   n10 (pinned): inputs n7 46+17 = 63, n8 68+11 = 79, n9 on P2 at 77 -> P2 [79, 86]. Makespan 86.
TOPCUOGLU_CPOP_PROC = [1, 1, 0, 2, 1, 2, 0, 2, 1, 1]
TOPCUOGLU_CPOP_START = [0, 16, 28, 25, 35, 42, 39, 54, 65, 79]
TOPCUOGLU_CPOP_FINISH = [16, 35, 39, 42, 48, 51, 46, 68, 77, 86]


def crowded_problem() -> Problem:
    """40 independent tasks released at scattered times, one processor far faster than the other seven:
    every task goes there (rows grow past their initial width) and the early ones fill idle gaps."""
    rng = np.random.default_rng(0)
    comp = np.full((40, 8), 100.0)
    comp[:, 0] = rng.integers(1, 5, 40)
    empty = np.zeros(0, int)
    return Problem(comp, empty, empty, np.zeros(0), task_arrival=rng.integers(0, 60, 40).astype(float))


def varied_problems():
    """Hand-worked, crowded, random and generated problems, with and without bandwidths and release times."""
    yield topcuoglu_example()
    yield crowded_problem()
    for seed in range(120):
        yield random_problem(seed, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0)
    for num_tasks, num_procs in ((30, 3), (100, 16), (300, 40)):
        for ccr in (0.1, 1.0, 10.0):
            for beta in (0.1, 1.0):
                yield random_dag(num_tasks, num_procs, ccr=ccr, beta=beta, seed=num_tasks + int(10 * ccr))
    yield random_dag(200, 8, integer=True, seed=1)
    yield cloudsim(60, 6, seed=2)
    yield gaussian_elimination(8, 4, ccr=5.0, seed=3)
