"""Conversion between `Problem` and instances of SAGA (PyPI `anrg-saga`, extra `saga`).

SAGA describes an instance by a task graph (tasks with a cost, dependencies with a data size) and a
network (nodes with a speed, undirected links with a speed, a self link per node). Task t takes
cost[t] / speed[p] on node p and an edge's transfer from p to q takes size / link_speed[p, q]. In
`Problem` terms: comp = outer(cost, 1 / speed), data = size, bandwidth = link speeds. So:

* SAGA -> `Problem` (`from_saga`) always fits, except for zero speeds (infinite times: ValueError) and
  finite self links: `Problem` moves data within a processor instantly, SAGA divides it by the self
  link's speed (its random networks use 1e9). `self_links="instant"` accepts them as instant, the
  default "exact" raises ValueError.
* `Problem` -> SAGA (`to_saga`) needs comp of rank one (a task cost over a processor speed),
  symmetric bandwidths and no release times; ValueError otherwise. The neural scheduler's task and
  processor features have no SAGA counterpart and are not carried.

Tasks and nodes are matched to indices by name lists: `to_saga` names them by zero-padded index
(so that sorting the names gives back the indices), `from_saga` orders them by the given lists,
or by names (numbers by value) by default. `schedule_from_saga` / `schedule_to_saga` convert schedules
the same way, so SAGA's schedules can be checked with `jaxsched.problem.validate`.

SAGA's tie rules: its schedulers take the first task of `task_graph.topological_sort()` and the first node
of `network.nodes` among equals, and SAGA 2.0.2 keeps both in frozensets of pydantic models hashed by
their name strings, so both orders change with Python's string hashing (`PYTHONHASHSEED`) from one
process to the next: no fixed rule reproduces them. `schedule_in_sagas_order` reads them off the SAGA
objects in this process and hands them to our topological-order presets (MCT, MST, OLB, MET,
FastestNode), whose makespans then equal SAGA's in the same process.

SAGA's licence forbids commercial use; this module only calls it, imported on first use.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

import numpy as np

from jaxsched.listsched import list_schedule, make_plan, preset
from jaxsched.problem import Problem, Schedule, check_problem

SELF_LINKS = ("exact", "instant")


def import_saga():
    """The `saga` package; ImportError naming the extra to install when it is missing."""
    try:
        import saga
    except ImportError as error:
        raise ImportError(
            "SAGA is not installed: install the extra `saga` (pip install 'jax-research-systems[saga]', "
            "which installs anrg-saga; its licence forbids commercial use)"
        ) from error
    return saga


class SagaProblem(NamedTuple):
    """A `Problem` with the SAGA names of its tasks (row order of comp) and processors (column order)."""

    problem: Problem
    tasks: tuple[str, ...]
    nodes: tuple[str, ...]


def _natural_key(name: str):
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


def _order(kind: str, names: set[str], order: Sequence[str] | None) -> tuple[str, ...]:
    if order is None:
        return tuple(sorted(names, key=_natural_key))
    order = tuple(order)
    if len(set(order)) != len(order) or set(order) != names:
        missing, extra = sorted(names - set(order)), sorted(set(order) - names)
        raise ValueError(
            f"{kind}_order must list each {kind} once: missing {missing[:5]}, unknown {extra[:5]}"
            + (", duplicates" if len(set(order)) != len(order) else "")
        )
    return order


def from_saga(
    task_graph,
    network,
    *,
    task_order: Sequence[str] | None = None,
    node_order: Sequence[str] | None = None,
    self_links: str = "exact",
) -> SagaProblem:
    """The `Problem` of a SAGA `TaskGraph` and `Network` (module docstring), tasks and processors in
    `task_order` / `node_order` (default: names sorted, digit runs by value). Links SAGA lacks have
    speed zero there (never usable): ValueError, as for zero node speeds."""
    if self_links not in SELF_LINKS:
        raise ValueError(f"self_links must be one of {', '.join(SELF_LINKS)}, got {self_links!r}")
    tasks = _order("task", {t.name for t in task_graph.tasks}, task_order)
    nodes = _order("node", {n.name for n in network.nodes}, node_order)
    task_index = {name: i for i, name in enumerate(tasks)}
    node_index = {name: i for i, name in enumerate(nodes)}
    cost = np.zeros(len(tasks))
    for task in task_graph.tasks:
        cost[task_index[task.name]] = task.cost
    speed = np.zeros(len(nodes))
    for node in network.nodes:
        speed[node_index[node.name]] = node.speed
    if not np.all(speed > 0):
        bad = nodes[int(np.argmin(speed > 0))]
        raise ValueError(f"node {bad!r} has speed {speed[nodes.index(bad)]}: execution times would be infinite")
    links = np.zeros((len(nodes), len(nodes)))
    for edge in network.edges:
        p, q = node_index[edge.source], node_index[edge.target]
        links[p, q] = links[q, p] = edge.speed
        if p == q and self_links == "exact" and edge.speed != np.inf:
            raise ValueError(
                f"node {edge.source!r} has a self link of speed {edge.speed}: a Problem moves data within a "
                "processor instantly; pass self_links='instant' to accept that"
            )
    np.fill_diagonal(links, np.inf)
    if not np.all(links > 0):
        p, q = np.argwhere(~(links > 0))[0]
        raise ValueError(f"link {nodes[p]!r} - {nodes[q]!r} has speed {links[p, q]}: transfers would never end")
    edges = sorted((task_index[d.source], task_index[d.target], d.size) for d in task_graph.dependencies)
    src, dst, data = (np.array(column) for column in zip(*edges)) if edges else ([], [], [])
    bandwidth = None if np.all(links[~np.eye(len(nodes), dtype=bool)] == 1.0) else links  # all 1: the default
    problem = Problem(np.outer(cost, 1.0 / speed), src, dst, np.asarray(data, dtype=np.float64), bandwidth)
    return SagaProblem(problem, tasks, nodes)


def _names(prefix: str, count: int) -> tuple[str, ...]:
    width = len(str(count - 1))
    return tuple(f"{prefix}{i:0{width}d}" for i in range(count))


def cost_and_speed(problem: Problem, rtol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """([T] cost, [P] speed) with comp = outer(cost, 1 / speed), processor 0 of speed 1; ValueError
    when comp is not of that form (SAGA's machine model cannot hold it)."""
    comp = problem.comp
    row = int(comp.sum(axis=1).argmax())
    if comp[row].max() == 0:
        return np.zeros(problem.num_tasks), np.ones(problem.num_procs)
    if comp[row].min() == 0:
        raise ValueError(f"task {row} takes zero time on some processors only: not a cost over a speed")
    speed = comp[row, 0] / comp[row]
    cost = comp[:, 0]
    if not np.allclose(np.outer(cost, 1.0 / speed), comp, rtol=rtol, atol=0.0):
        task = int(np.abs(np.outer(cost, 1.0 / speed) - comp).max(axis=1).argmax())
        raise ValueError(
            f"comp is not a task cost over a processor speed (SAGA's model): task {task} has times "
            f"{comp[task].tolist()}, not proportional to task {row}'s {comp[row].tolist()}"
        )
    return cost, speed


def to_saga(problem: Problem) -> tuple[object, object, tuple[str, ...], tuple[str, ...]]:
    """(TaskGraph, Network, task names, node names) of `problem` (module docstring); ValueError when
    SAGA's model cannot hold it. Tasks are named "t<i>", nodes "p<i>" (zero-padded)."""
    check_problem(problem)
    import_saga()
    if problem.task_arrival is not None and np.any(problem.task_arrival > 0):
        raise ValueError("SAGA has no release times: the problem's task_arrival must be zero")
    bandwidth = np.ones((problem.num_procs,) * 2) if problem.bandwidth is None else problem.bandwidth
    if not np.array_equal(bandwidth, bandwidth.T):
        p, q = np.argwhere(bandwidth != bandwidth.T)[0]
        raise ValueError(f"SAGA's links are undirected: bandwidth[{p}, {q}] = {bandwidth[p, q]} != [{q}, {p}]")
    cost, speed = cost_and_speed(problem)
    return related_to_saga(cost, speed, problem.src, problem.dst, problem.data, bandwidth)


def related_to_saga(cost, speed, src, dst, data, strength) -> tuple[object, object, tuple[str, ...], tuple[str, ...]]:
    """(TaskGraph, Network, task names, node names) of a related-machines problem given as such: task
    `cost` [T], node `speed` [P], edges `src` -> `dst` with `data`, symmetric link `strength` [P, P]
    (self links instant). A `DenseInstance` in float32 is exact this way, where its comp would not be."""
    saga = import_saga()
    cost, speed, strength = (np.asarray(x, dtype=np.float64) for x in (cost, speed, strength))
    tasks, nodes = _names("t", cost.shape[0]), _names("p", speed.shape[0])
    task_graph = saga.TaskGraph(
        tasks=frozenset(saga.TaskGraphNode(name=n, cost=float(c)) for n, c in zip(tasks, cost)),
        dependencies=frozenset(
            saga.TaskGraphEdge(source=tasks[s], target=tasks[d], size=float(x))
            for s, d, x in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), np.asarray(data).tolist())
        ),
    )
    links = [
        saga.NetworkEdge(source=nodes[p], target=nodes[q], speed=float(np.inf if p == q else strength[p, q]))
        for p in range(speed.shape[0])
        for q in range(p, speed.shape[0])
    ]
    network = saga.Network(
        nodes=frozenset(saga.NetworkNode(name=n, speed=float(s)) for n, s in zip(nodes, speed)),
        edges=frozenset(links),
    )
    return task_graph, network, tasks, nodes


def schedule_in_sagas_order(task_graph, network, name: str) -> tuple[Schedule, SagaProblem]:
    """Our preset `name` (one that visits tasks in topological order: MCT, MST, OLB, MET, FastestNode) on a
    SAGA instance, with SAGA's tie rules as they stand in this process (module docstring): processors
    indexed in `network.nodes` order (our ties go to the lowest index) and tasks visited in
    `task_graph.topological_sort()` order. Returns the schedule and the converted instance (self links
    instant)."""
    config = preset(name)
    if config.priority != "topological" or config.dynamic:
        raise ValueError(
            f"{name} does not visit tasks in topological order: SAGA's order applies to MCT, MST, OLB, ..."
        )
    ours = from_saga(task_graph, network, node_order=[n.name for n in network.nodes], self_links="instant")
    order = np.array([ours.tasks.index(t.name) for t in task_graph.topological_sort()], dtype=np.int64)
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    plan = make_plan(ours.problem, config)._replace(position=position, order=order)
    return list_schedule(ours.problem, config, plan), ours


def dense_to_saga(instance) -> tuple[object, object, tuple[str, ...], tuple[str, ...]]:
    """`related_to_saga` of one `jaxsched.dense.DenseInstance` (its real tasks and processors)."""
    num_tasks, num_procs = int(instance.num_tasks), int(instance.num_procs)
    adj = np.triu(np.asarray(instance.adj)[:num_tasks, :num_tasks], 1)
    src, dst = np.nonzero(adj)
    return related_to_saga(
        np.asarray(instance.weight)[:num_tasks],
        np.asarray(instance.speed)[:num_procs],
        src,
        dst,
        np.asarray(instance.data)[src, dst],
        np.asarray(instance.strength)[:num_procs, :num_procs],
    )


def schedule_from_saga(saga_schedule, tasks: Sequence[str], nodes: Sequence[str]) -> Schedule:
    """Our `Schedule` of a SAGA schedule, tasks and processors indexed by `tasks` / `nodes`; ValueError
    when a task is missing or scheduled twice, or a node is unknown."""
    task_index = {name: i for i, name in enumerate(tasks)}
    node_index = {name: i for i, name in enumerate(nodes)}
    proc = np.full(len(tasks), -1, dtype=np.int64)
    start, finish = np.zeros(len(tasks)), np.zeros(len(tasks))
    for node, placed in saga_schedule.mapping.items():
        if node not in node_index:
            raise ValueError(f"the schedule uses node {node!r}, not among the {len(nodes)} nodes given")
        for task in placed:
            t = task_index.get(task.name)
            if t is None or proc[t] >= 0:
                raise ValueError(f"task {task.name!r} is unknown or scheduled twice")
            proc[t], start[t], finish[t] = node_index[node], task.start, task.end
    if (proc < 0).any():
        raise ValueError(f"task {tasks[int(np.argmax(proc < 0))]!r} is not scheduled")
    return Schedule(proc=proc, start=start, finish=finish)


def schedule_to_saga(schedule: Schedule, task_graph, network, tasks: Sequence[str], nodes: Sequence[str]):
    """SAGA's `Schedule` of our `schedule` on the SAGA instance (`task_graph`, `network`) whose tasks
    and nodes are named `tasks` / `nodes` in index order."""
    saga = import_saga()
    mapping = {name: [] for name in nodes}
    for t in np.lexsort((schedule.finish, schedule.start)).tolist():
        mapping[nodes[int(schedule.proc[t])]].append(
            saga.ScheduledTask(
                node=nodes[int(schedule.proc[t])],
                name=tasks[t],
                start=float(schedule.start[t]),
                end=float(schedule.finish[t]),
            )
        )
    return saga.Schedule(task_graph, network, mapping)
