"""Scheduling problems and schedules: a DAG of tasks with per-processor execution times.

A `Problem` stores the DAG as edge arrays (never a dense T x T matrix: the paper's largest instance
has 84,654 tasks) and validates itself on construction, so every algorithm downstream can trust it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import zipfile
import zlib
from pathlib import Path
from typing import Optional

import numpy as np

from jaxsched.common.arguments import number

_FEATURES = ("task_arrival", "task_priority", "task_memory", "proc_cores", "proc_frequency", "proc_memory")


def real_array(name: str, value) -> np.ndarray:
    """`value` as a new float64 array; raises ValueError naming `name` for booleans, complex numbers
    and non-numbers (NumPy would read True as 1 and drop an imaginary part)."""
    array = np.asarray(value)
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}")
    return array.astype(np.float64)


def _as_float_array(name: str, value, shape: tuple[int, ...]) -> np.ndarray:
    array = real_array(name, value)
    if array.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {array.shape}")
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"{name} must be finite, got {array[tuple(bad)]} at index {tuple(int(i) for i in bad)}")
    if np.any(array < 0):
        bad = np.argwhere(array < 0)[0]
        raise ValueError(f"{name} must be non-negative, got {array[tuple(bad)]} at index {tuple(int(i) for i in bad)}")
    array.setflags(write=False)
    return array


def _as_index_array(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        integral = (
            np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) and np.all(array == np.round(array))
        )
        if not integral:
            raise ValueError(f"{name} must hold integer task indices, got dtype {array.dtype}")
    array = array.astype(np.int64)
    array.setflags(write=False)
    return array


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """A static DAG-scheduling instance on heterogeneous processors.

    Attributes:
      comp: [T, P] execution time of task t on processor p.
      src, dst: [E] edge endpoints; task `dst` needs the output of task `src`.
      data: [E] communication time of each edge when its tasks run on different processors
        (divided by `bandwidth[p, q]` when given; zero on the same processor).
      bandwidth: optional [P, P] relative link speed between processors (diagonal ignored); `inf` is an
        instant link, whose transfers take zero time.
      task_arrival: optional [T] release time: a task never starts before it (default 0).
      task_priority, task_memory: optional [T] task features for the neural scheduler.
      proc_cores, proc_frequency, proc_memory: optional [P] processor features.
      packed: [3 + T * P + 3 * E + T] int64, set on construction: the sizes T, P, E, then `comp` (raveled)
        and `data` (as float64 bits), `src`, `dst` and `topological_order`, one block of which those five
        are read-only views (`packed_layout`), so a batch's compiled passes read each problem in place.
      packed_address: the address of `packed`'s first byte, set on construction (and on unpickling), so a
        batch hands its problems to compiled code as one array of addresses (`numba_batch_graph.block_arrays`).

    Raises ValueError on construction for wrong shapes, negative/NaN/inf costs, a NaN, negative, zero or
    -inf bandwidth, edge indices out of range, self loops, duplicate edges and cycles (naming one cycle).
    """

    comp: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    data: np.ndarray
    bandwidth: Optional[np.ndarray] = None
    task_arrival: Optional[np.ndarray] = None
    task_priority: Optional[np.ndarray] = None
    task_memory: Optional[np.ndarray] = None
    proc_cores: Optional[np.ndarray] = None
    proc_frequency: Optional[np.ndarray] = None
    proc_memory: Optional[np.ndarray] = None

    def __post_init__(self):
        comp = np.asarray(self.comp)
        if comp.ndim != 2 or comp.shape[0] < 1 or comp.shape[1] < 1:
            raise ValueError(f"comp must have shape [T, P] with T, P >= 1, got {comp.shape}")
        num_tasks, num_procs = comp.shape
        set_ = functools.partial(object.__setattr__, self)
        set_("comp", _as_float_array("comp", comp, comp.shape))
        src, dst = _as_index_array("src", self.src), _as_index_array("dst", self.dst)
        if src.shape != dst.shape:
            raise ValueError(f"src and dst must have the same shape, got {src.shape} and {dst.shape}")
        set_("src", src)
        set_("dst", dst)
        set_("data", _as_float_array("data", self.data, src.shape))
        for name, index in (("src", src), ("dst", dst)):
            out = (index < 0) | (index >= num_tasks)
            if out.any():
                e = int(np.argmax(out))
                raise ValueError(f"{name}[{e}] = {index[e]} is out of range for {num_tasks} tasks")
        loops = src == dst
        if loops.any():
            e = int(np.argmax(loops))
            raise ValueError(f"edge {e} is a self loop on task {src[e]}")
        keys = src * num_tasks + dst
        unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = unique[counts > 1][0]
            raise ValueError(f"duplicate edge {dup // num_tasks} -> {dup % num_tasks}")
        if self.bandwidth is not None:
            bandwidth = real_array("bandwidth", self.bandwidth)
            if bandwidth.shape != (num_procs, num_procs):
                raise ValueError(f"bandwidth must have shape {(num_procs, num_procs)}, got {bandwidth.shape}")
            np.fill_diagonal(bandwidth, 1.0)
            bad = ~(bandwidth > 0)  # NaN, zero, negative, -inf; +inf is an instant link (zero transfer time)
            if bad.any():
                index = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ValueError(
                    f"bandwidth must be positive (inf for an instant link) between distinct processors, "
                    f"got {bandwidth[index]} at index {index}"
                )
            bandwidth.setflags(write=False)
            if np.any(bandwidth < 1 / np.finfo(np.float64).max):
                raise ValueError(
                    f"bandwidth {bandwidth.min():.3g} is too small: transfer times (data / bandwidth) overflow float64"
                )
            set_("bandwidth", bandwidth)
        for name in _FEATURES:
            value = getattr(self, name)
            if value is not None:
                length = num_tasks if name.startswith("task_") else num_procs
                set_(name, _as_float_array(name, value, (length,)))
        set_("packed", _packed(self.comp, self.data, src, dst, self.topological_order))  # raises on cycles
        set_("packed_address", self.packed.ctypes.data)
        layout = packed_layout(self.packed)
        set_("comp", layout["comp"].reshape(num_tasks, num_procs))
        for name in ("data", "src", "dst"):
            set_(name, layout[name])
        self.__dict__["topological_order"] = layout["topo"]
        with np.errstate(over="ignore"):
            horizon = self.arrival.max() + self.comp.max(axis=1).sum() + self.data.sum() * self.inverse_bandwidth.max()
        if not np.isfinite(horizon):
            raise ValueError("times of this problem (release times plus costs plus transfers) overflow float64")

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "packed_address"}

    def __setstate__(self, state: dict) -> None:
        """An unpickled problem's block lies elsewhere: its address is taken again."""
        self.__dict__.update(state)
        self.__dict__["packed_address"] = self.packed.ctypes.data

    @property
    def num_tasks(self) -> int:
        return self.comp.shape[0]

    @property
    def num_procs(self) -> int:
        return self.comp.shape[1]

    @property
    def num_edges(self) -> int:
        return self.src.shape[0]

    @functools.cached_property
    def max_in_degree(self) -> int:
        """The most incoming edges of any task (0 without edges)."""
        return int(np.bincount(self.dst, minlength=1).max()) if self.num_edges else 0

    @functools.cached_property
    def arrival(self) -> np.ndarray:
        """[T] release times (zeros when the problem has none)."""
        if self.task_arrival is None:
            return np.zeros(self.num_tasks)
        return self.task_arrival

    @functools.cached_property
    def inverse_bandwidth(self) -> np.ndarray:
        """[P, P] factor turning `data` into a transfer time; zero on the diagonal and on instant links."""
        factor = 1.0 - np.eye(self.num_procs)
        if self.bandwidth is None:
            return factor
        return factor / self.bandwidth

    @functools.cached_property
    def in_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of incoming edges: edges of task t are `order[ptr[t]:ptr[t+1]]` (indices into src/dst/data)."""
        return _csr(self.dst, self.num_tasks)

    @functools.cached_property
    def out_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """CSR of outgoing edges, as `in_edges`."""
        return _csr(self.src, self.num_tasks)

    @functools.cached_property
    def levels(self) -> np.ndarray:
        """[T] topological level: 0 for entry tasks, else 1 + max level of the predecessors."""
        return self._kahn[1]

    @functools.cached_property
    def edges_by_src_level(self) -> list[np.ndarray]:
        """Edge indices grouped by the level of their source task: entry L holds level L's out-edges."""
        return _group(self.levels[self.src], int(self.levels.max()) + 1)

    @functools.cached_property
    def edges_by_dst_level(self) -> list[np.ndarray]:
        """Edge indices grouped by the level of their destination task."""
        return _group(self.levels[self.dst], int(self.levels.max()) + 1)

    @functools.cached_property
    def tasks_by_level(self) -> list[np.ndarray]:
        """Task indices grouped by level."""
        return _group(self.levels, int(self.levels.max()) + 1)

    @functools.cached_property
    def topological_order(self) -> np.ndarray:
        """[T] the canonical topological order: by level, then by task index.

        Every algorithm here breaks ties by position in this order, which keeps tie-breaking
        deterministic and consistent with precedence.
        """
        return self._kahn[0]

    @functools.cached_property
    def _kahn(self) -> tuple[np.ndarray, np.ndarray]:
        indegree = np.bincount(self.dst, minlength=self.num_tasks)
        out_ptr, out_order = self.out_edges
        succ = self.dst[out_order]
        level = np.full(self.num_tasks, -1, dtype=np.int64)
        frontier = np.flatnonzero(indegree == 0)
        depth = 0
        while frontier.size:
            level[frontier] = depth
            starts, ends = out_ptr[frontier], out_ptr[frontier + 1]
            if starts.size == 1:
                children = succ[starts[0] : ends[0]]
            else:
                children = succ[_ranges(starts, ends)]
            np.subtract.at(indegree, children, 1)
            frontier = np.unique(children[indegree[children] == 0])
            depth += 1
        if (level < 0).any():
            raise ValueError(f"the task graph has a cycle: {' -> '.join(map(str, self._find_cycle(level < 0)))}")
        order = np.lexsort((np.arange(self.num_tasks), level))
        return order, level

    def _find_cycle(self, remaining: np.ndarray) -> list[int]:
        """Walks predecessors inside the unsorted remainder (each has one there) until a task repeats."""
        in_ptr, in_order = self.in_edges
        task = int(np.flatnonzero(remaining)[0])
        seen: dict[int, int] = {}
        path: list[int] = []
        while task not in seen:
            seen[task] = len(path)
            path.append(task)
            preds = self.src[in_order[in_ptr[task] : in_ptr[task + 1]]]
            task = int(preds[remaining[preds]][0])
        cycle = path[seen[task] :][::-1]
        return cycle + [cycle[0]]


def _packed(comp: np.ndarray, data: np.ndarray, src: np.ndarray, dst: np.ndarray, topo: np.ndarray) -> np.ndarray:
    """`Problem.packed` of these arrays (read-only)."""
    (num_tasks, num_procs), num_edges = comp.shape, len(src)
    block = np.empty(3 + num_tasks * num_procs + 3 * num_edges + num_tasks, np.int64)
    block[:3] = num_tasks, num_procs, num_edges
    layout = packed_layout(block)
    layout["comp"][:], layout["data"][:] = comp.ravel(), data
    layout["src"][:], layout["dst"][:], layout["topo"][:] = src, dst, topo
    block.setflags(write=False)
    return block


def packed_layout(block: np.ndarray) -> dict[str, np.ndarray]:
    """The 1-D views of one `Problem.packed` block by name: comp (raveled) and data as float64, src, dst and
    topo (the topological order) as int64."""
    num_tasks, num_procs, num_edges = (int(size) for size in block[:3])
    ends = np.cumsum([3, num_tasks * num_procs, num_edges, num_edges, num_edges, num_tasks])
    views = [block[start:end] for start, end in zip(ends[:-1], ends[1:])]
    return dict(comp=views[0].view(np.float64), data=views[1].view(np.float64), src=views[2], dst=views[3],
                topo=views[4])


def _csr(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=size), out=ptr[1:])
    return ptr, order


def _group(keys: np.ndarray, size: int) -> list[np.ndarray]:
    """Indices of `keys` grouped by key value 0..size-1."""
    order = np.argsort(keys, kind="stable")
    return np.split(order, np.searchsorted(keys[order], np.arange(1, size)))


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, e) for each pair, without a Python loop."""
    lengths = ends - starts
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return np.arange(total) + offsets


@dataclasses.dataclass(frozen=True, eq=False)
class Schedule:
    """A schedule: processor, start and finish time of every task."""

    proc: np.ndarray  # [T] int
    start: np.ndarray  # [T]
    finish: np.ndarray  # [T]

    @property
    def makespan(self) -> float:
        return float(self.finish.max()) if self.finish.size else 0.0


def check_problem(problem) -> None:
    """Raises ValueError unless `problem` is a `Problem` (the public entry points call it, so that a
    wrong argument is named rather than failing on a missing attribute)."""
    if not isinstance(problem, Problem):
        raise ValueError(f"expected a jaxsched.Problem, got {type(problem).__name__}")


def _processor_ids(proc: np.ndarray) -> np.ndarray:
    """`schedule.proc` as int64; raises ValueError for booleans, fractions and NaN (never truncated)."""
    if np.issubdtype(proc.dtype, np.integer):
        return proc.astype(np.int64)
    if np.issubdtype(proc.dtype, np.floating):
        with np.errstate(invalid="ignore"):
            fractional = ~np.isfinite(proc) | (proc != np.round(proc))
        if not fractional.any():
            return proc.astype(np.int64)
        t = int(np.argmax(fractional))
        raise ValueError(f"schedule.proc must hold integer processor ids, got {proc[t]} for task {t}")
    raise ValueError(f"schedule.proc must hold integer processor ids, got dtype {proc.dtype}")


def validate(problem: Problem, schedule: Schedule, *, rtol: float = 1e-9) -> None:
    """Raises ValueError naming the first violated constraint of `schedule` on `problem`.

    Checks, in this order: shapes and that every task is scheduled on a real processor, durations
    (finish - start == comp[t, proc[t]]), release times, precedence with communication delay, and that
    no two tasks overlap on one processor (zero-length tasks occupy no time). Tolerances are relative to
    the makespan, so schedules computed in float32 validate too when `rtol` is loosened.
    """
    check_problem(problem)
    if not isinstance(schedule, Schedule):
        raise ValueError(f"expected a jaxsched.Schedule, got {type(schedule).__name__}")
    rtol = number("rtol", rtol, 0)
    num_tasks = problem.num_tasks
    proc = np.asarray(schedule.proc)
    start = real_array("schedule.start", schedule.start)
    finish = real_array("schedule.finish", schedule.finish)
    for name, array in (("proc", proc), ("start", start), ("finish", finish)):
        if array.shape != (num_tasks,):
            raise ValueError(f"schedule.{name} must have shape ({num_tasks},), got {array.shape}")
    proc = _processor_ids(proc)
    unscheduled = (proc < 0) | (proc >= problem.num_procs) | ~np.isfinite(start) | ~np.isfinite(finish)
    if unscheduled.any():
        t = int(np.argmax(unscheduled))
        raise ValueError(f"task {t} is unscheduled (proc={proc[t]}, start={start[t]}, finish={finish[t]})")
    tol = rtol * max(1.0, float(np.abs(finish).max()))
    duration = problem.comp[np.arange(num_tasks), proc]
    bad = np.abs(finish - start - duration) > tol
    if bad.any():
        t = int(np.argmax(bad))
        raise ValueError(f"task {t} runs {finish[t] - start[t]} on processor {proc[t]} but takes {duration[t]} there")
    early = start < problem.arrival - tol
    if early.any():
        t = int(np.argmax(early))
        raise ValueError(f"task {t} starts at {start[t]} before its arrival {problem.arrival[t]}")
    comm = problem.data * problem.inverse_bandwidth[proc[problem.src], proc[problem.dst]]
    late = start[problem.dst] < finish[problem.src] + comm - tol
    if late.any():
        e = int(np.argmax(late))
        u, v = int(problem.src[e]), int(problem.dst[e])
        raise ValueError(
            f"precedence violated on edge {u} -> {v}: task {v} starts at {start[v]} but task {u} finishes "
            f"at {finish[u]} and the transfer takes {comm[e]}"
        )
    busy = finish - start > tol
    order = np.lexsort((start, proc))
    order = order[busy[order]]
    same = proc[order[1:]] == proc[order[:-1]]
    overlap = same & (start[order[1:]] < finish[order[:-1]] - tol)
    if overlap.any():
        i = int(np.argmax(overlap))
        a, b = int(order[i]), int(order[i + 1])
        raise ValueError(
            f"tasks {a} [{start[a]}, {finish[a]}) and {b} [{start[b]}, {finish[b]}) overlap on processor {proc[a]}"
        )


def save_problem(path: str | os.PathLike, problem: Problem) -> None:
    """Writes `problem` to an .npz file (optional fields only when present)."""
    arrays = {f.name: getattr(problem, f.name) for f in dataclasses.fields(Problem)}
    np.savez_compressed(path, **{k: v for k, v in arrays.items() if v is not None})


def read_npz(
    path: str | os.PathLike, what: str, required: set[str], allowed: set[str] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of the .npz file at `path`, which must hold every `required` name and only `allowed`
    ones (None: any); raises FileNotFoundError when it is missing and ValueError naming the file when
    it is empty, truncated, corrupted or not a `what` file (a problem given for a schedule, say)."""
    allowed = None if allowed is None else set(allowed) | set(required)
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} file at {path}")
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise ValueError("a single .npy array, not an .npz archive")
        with npz:
            names = set(npz.files)
            missing, unknown = required - names, set() if allowed is None else names - allowed
            if missing or unknown:
                raise ValueError(f"it holds arrays {sorted(names)}, not {sorted(required)}")
            return {name: npz[name] for name in npz.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        raise ValueError(f"{path} is not a {what} file ({error})") from error


def load_problem(path: str | os.PathLike) -> Problem:
    """Reads a problem written by `save_problem` (validated again on construction); raises
    ValueError naming the file when it is not one."""
    names = {f.name for f in dataclasses.fields(Problem)}
    arrays = read_npz(path, "problem", {"comp", "src", "dst", "data"}, names)
    try:
        return Problem(**arrays)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error


def save_schedule(path: str | os.PathLike, schedule: Schedule) -> None:
    """Writes `schedule` to an .npz file."""
    np.savez_compressed(path, proc=schedule.proc, start=schedule.start, finish=schedule.finish)


def load_schedule(path: str | os.PathLike) -> Schedule:
    """Reads a schedule written by `save_schedule`; raises ValueError naming the file when it is not
    one (checked: three one-dimensional arrays of one length, integer processors, real times)."""
    names = {"proc", "start", "finish"}
    arrays = read_npz(path, "schedule", names, names)
    proc, start, finish = arrays["proc"], arrays["start"], arrays["finish"]
    if not (proc.ndim == start.ndim == finish.ndim == 1 and proc.shape == start.shape == finish.shape):
        raise ValueError(
            f"{path}: proc, start and finish must be one-dimensional of one length, got shapes "
            f"{proc.shape}, {start.shape}, {finish.shape}"
        )
    try:
        proc = _processor_ids(proc)
        start, finish = real_array("start", start), real_array("finish", finish)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from error
    return Schedule(proc=proc, start=start, finish=finish)
