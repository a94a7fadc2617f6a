"""Our list schedulers against SAGA's (PyPI `anrg-saga`, extra `saga`) on SAGA's own ~500-task instances.

    python -m benchmarks.saga                          # 2 instances per family, every shared scheduler
    python -m benchmarks.saga --instances 1 --names HEFT MinMin

Instances: SAGA's generators (out-trees and in-trees of 8 levels, branching 2: 512 tasks with the
added sink; 25 parallel chains of 20 tasks: 502), weights uniform in [0.5, 1.5), on random complete
networks of `--nodes` nodes, converted by `jaxsched.saga_adapter.from_saga`. Per instance and scheduler,
in turns: SAGA's pure-Python scheduler, our NumPy reference (`jaxsched.listsched.schedule`) and our
compiled loop (`list_schedule_numba`, compiled beforehand), one run each. Prints the mean seconds per
instance and the speedups over SAGA. Target: at least 10x SAGA.
"""

from __future__ import annotations

import argparse
import random
import time
from importlib.metadata import version

import numpy as np

from jaxsched import duplex, from_saga, import_saga, schedule
from jaxsched.common import machine_description
from jaxsched.numba import list_schedule as list_schedule_numba

SAGA_CLASSES = {
    "HEFT": "HeftScheduler", "CPOP": "CpopScheduler", "MCT": "MCTScheduler", "MET": "METScheduler",
    "OLB": "OLBScheduler", "MST": "MSTScheduler", "FastestNode": "FastestNodeScheduler",
    "MinMin": "MinMinScheduler", "MaxMin": "MaxMinScheduler", "Sufferage": "SufferageScheduler",
    "ETF": "ETFScheduler", "WBA": "WBAScheduler", "Duplex": "DuplexScheduler",
}


def saga_families(instances: int, nodes: int, seed: int) -> dict[str, list]:
    """{family: [(task graph, network), ...]} of SAGA's generators at about 500 tasks."""
    from saga.schedulers.data import random as saga_random

    rng = random.Random(seed)

    def weight(*_):
        return rng.uniform(0.5, 1.5)

    graphs = {
        "out-trees": saga_random.gen_out_trees(instances, 8, 2, weight, weight),
        "in-trees": saga_random.gen_in_trees(instances, 8, 2, weight, weight),
        "parallel chains": saga_random.gen_parallel_chains(instances, 25, 20, weight, weight),
    }
    return {
        family: list(zip(found, saga_random.gen_random_networks(instances, nodes, weight, weight)))
        for family, found in graphs.items()
    }


def numba_schedule(problem, name: str):
    """`name`'s schedule by the compiled loop (Duplex: the better of its compiled halves)."""
    if name == "Duplex":
        return duplex((list_schedule_numba(problem, "MinMin"), list_schedule_numba(problem, "MaxMin")))
    return list_schedule_numba(problem, name)


def _seconds(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=2, help="instances per family")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--names", nargs="+", default=list(SAGA_CLASSES), help=" ".join(SAGA_CLASSES))
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in SAGA_CLASSES]
    if unknown or args.instances < 1 or args.nodes < 1:
        parser.exit(2, f"{parser.prog}: error: need known --names, --instances >= 1, --nodes >= 1 (got {unknown})\n")
    try:
        import_saga()
    except ImportError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    from saga import schedulers

    instances = [pair for pairs in saga_families(args.instances, args.nodes, args.seed).values() for pair in pairs]
    problems = [from_saga(g, n, self_links="instant").problem for g, n in instances]
    sizes = sorted({p.num_tasks for p in problems})
    print(f"# anrg-saga {version('anrg-saga')}: {len(problems)} instances ({sizes} tasks), "
          f"{args.nodes} nodes; {machine_description(load=True)}")
    print("| scheduler | SAGA (s/instance) | NumPy (s/instance) | numba (s/instance) | NumPy speedup | numba speedup |")
    print("|---|---|---|---|---|---|")
    for name in args.names:
        numba_schedule(problems[0], name)  # compile, or load from the cache
        times = np.zeros((3, len(problems)))
        for i, ((task_graph, network), problem) in enumerate(zip(instances, problems)):
            times[0, i] = _seconds(getattr(schedulers, SAGA_CLASSES[name])().schedule, network, task_graph)
            times[1, i] = _seconds(schedule, problem, name)
            times[2, i] = _seconds(numba_schedule, problem, name)
        saga_s, numpy_s, numba_s = times.mean(axis=1)
        print(f"| {name} | {saga_s:.3f} | {numpy_s:.4f} | {numba_s:.5f} | {saga_s / numpy_s:.0f}x | "
              f"{saga_s / numba_s:.0f}x |", flush=True)


if __name__ == "__main__":
    main()
