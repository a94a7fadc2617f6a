import numpy as np
import pytest

from jaxsched import Shape, pad_problems
from jaxsched._pull_stream import compact_streams
from jaxsched.batch_graph import BatchGraph
from jaxsched.jax_listsched import list_schedule_batch, plan_batch
from jaxsched.listsched import preset, schedule
from tests.jaxsched.problems import random_problem

SHAPE = Shape(12, 3, 66, 11)


def _problems(count=12):
    return [random_problem(seed, max_tasks=12, max_procs=3, arrival=seed % 2 == 0) for seed in range(count)]


@pytest.mark.parametrize("width", [1, 3, 16])
def test_stream_visits_every_task_once_with_all_its_predecessors(width):
    """Checked against each problem's own edge list: the micro-steps of a task are consecutive, in visit
    order, pull exactly its predecessors with their data, and the last one places it."""
    problems = _problems()
    graph = BatchGraph.of(problems, SHAPE.num_tasks, SHAPE.num_procs)
    order = plan_batch(problems, preset("MCT"), SHAPE, graph=graph).order
    stream = compact_streams(graph, order, width)
    assert stream.pred.shape[2] == width
    for b, problem in enumerate(problems):
        placed = stream.task[b][stream.place[b]]
        np.testing.assert_array_equal(placed, order[b, : problem.num_tasks])
        ends = np.flatnonzero(stream.place[b])
        assert not stream.place[b, ends[-1] + 1 :].any()
        begin = 0
        for task, end in zip(placed, ends):
            assert (stream.task[b, begin : end + 1] == task).all()
            pulled = stream.pred[b, begin : end + 1].ravel()
            real = pulled < SHAPE.num_tasks
            edges = np.flatnonzero(problem.dst == task)
            assert sorted(zip(pulled[real], stream.pred_data[b, begin : end + 1].ravel()[real])) == sorted(
                zip(problem.src[edges], problem.data[edges])
            )
            assert end - begin + 1 == max(1, -(-len(edges) // width))  # no empty chunk
            begin = end + 1


def test_any_width_gives_the_reference_schedule():
    """schedule_batch covers the default widths; one and a width that splits many tasks, here."""
    problems = _problems()
    name, config = "HEFT", preset("HEFT")
    graph = BatchGraph.of(problems, SHAPE.num_tasks, SHAPE.num_procs)
    batch, plans = pad_problems(problems, SHAPE, graph=graph), plan_batch(problems, config, SHAPE, graph=graph)
    for width in (1, 2):
        got = list_schedule_batch(batch, plans, config, streams=compact_streams(graph, plans.order, width))
        for b, problem in enumerate(problems):
            reference = schedule(problem, name)
            np.testing.assert_array_equal(np.asarray(got.proc[b, : problem.num_tasks]), reference.proc)
            np.testing.assert_array_equal(np.asarray(got.finish[b, : problem.num_tasks]), reference.finish)


def test_bad_width():
    problems = _problems(2)
    graph = BatchGraph.of(problems, SHAPE.num_tasks, SHAPE.num_procs)
    with pytest.raises(ValueError, match="width must be at least 1"):
        compact_streams(graph, graph.topo_order, 0)
