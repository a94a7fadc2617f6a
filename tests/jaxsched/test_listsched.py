import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxsched import Problem, heft, upward_rank, validate
from jaxsched.listsched import NAMES, PRESETS, ListConfig, schedule
from jaxsched.priorities import critical_path, downward_rank, optimistic_cost_table
from tests.jaxsched.problems import (
    TOPCUOGLU_CPOP_FINISH,
    TOPCUOGLU_CPOP_PROC,
    TOPCUOGLU_CPOP_START,
    random_problem,
    topcuoglu_example,
)


def peft_example() -> Problem:
    """The 10-task, 3-processor DAG of Arabnejad and Barbosa (2014), Fig. 2 and Table 2 (tasks
    renumbered from 0). Numbers as reproduced in the test data of github.com/mackncheesiest/peft
    (test/peftgraph_task_exe_time.csv and test/peftgraph_task_connectivity.csv)."""
    comp = [[22, 21, 36], [22, 18, 18], [32, 27, 43], [7, 10, 4], [29, 27, 35],
            [26, 17, 24], [14, 25, 30], [29, 23, 36], [15, 21, 8], [13, 16, 33]]
    edges = [(0, 1, 17), (0, 2, 31), (0, 3, 29), (0, 4, 13), (0, 5, 7), (1, 7, 3), (1, 8, 30), (2, 6, 16),
             (3, 7, 11), (3, 8, 7), (4, 8, 57), (5, 7, 5), (6, 9, 9), (7, 9, 42), (8, 9, 7)]
    src, dst, data = zip(*edges)
    return Problem(np.array(comp, float), np.array(src), np.array(dst), np.array(data, float))


def independent_example() -> Problem:
    """Three independent tasks a, b, c on two processors: comp a = [2, 5], b = [4, 1], c = [7, 3]."""
    return Problem(np.array([[2.0, 5.0], [4.0, 1.0], [7.0, 3.0]]), [], [], [])


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.booleans(), st.booleans())
def test_heft_preset_is_heft(seed, bandwidth, arrival):
    problem = random_problem(seed, bandwidth=bandwidth, arrival=arrival)
    ours, reference = schedule(problem, "HEFT"), heft(problem)
    np.testing.assert_array_equal(ours.proc, reference.proc)
    np.testing.assert_array_equal(ours.start, reference.start)
    np.testing.assert_array_equal(ours.finish, reference.finish)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "GA"])
def test_every_scheduler_validates(name):
    for seed in range(25):
        problem = random_problem(seed, max_tasks=14, bandwidth=seed % 2 == 0, arrival=seed % 3 == 0)
        validate(problem, schedule(problem, name))


def test_ga_is_a_named_scheduler():
    problem = random_problem(3)
    validate(problem, schedule(problem, "GA", population=8, generations=2))


def test_cpop_on_topcuoglu_example():
    """Topcuoglu, Hariri and Wu (2002), Sec. 4.2 and Fig. 3(b): critical path n1 n2 n9 n10 (length
    108) on P2, which runs it fastest (16+19+12+7 = 54 against 66 on P1 and 63 on P3); makespan 86;
    every task's processor, start and finish as worked by hand (`tests.jaxsched.problems`)."""
    problem = topcuoglu_example()
    tasks, proc = critical_path(problem)
    np.testing.assert_array_equal(tasks, [0, 1, 8, 9])
    assert proc == 1
    result = schedule(problem, "CPOP")
    assert result.makespan == 86
    np.testing.assert_array_equal(result.proc, TOPCUOGLU_CPOP_PROC)
    np.testing.assert_array_equal(result.start, TOPCUOGLU_CPOP_START)
    np.testing.assert_array_equal(result.finish, TOPCUOGLU_CPOP_FINISH)
    validate(problem, result)


def test_downward_rank_by_hand():
    """Topcuoglu's example: rank_d(n2) = rank_d(n1) + mean comp(n1) + c(1, 2) = 0 + 13 + 18 = 31;
    rank_u + rank_d is 108 on the critical path n1 n2 n9 n10."""
    problem = topcuoglu_example()
    rank = downward_rank(problem)
    assert rank[0] == 0 and rank[1] == 31
    np.testing.assert_allclose((upward_rank(problem) + rank)[[0, 1, 8, 9]], 108)


def test_peft_on_its_paper_example():
    """Arabnejad and Barbosa (2014): Table 3 (optimistic cost table) and Fig. 4 (PEFT schedule,
    makespan 122); expected values as reproduced in github.com/mackncheesiest/peft's tests."""
    problem = peft_example()
    expected_oct = [[64, 68, 86], [42, 39, 42], [27, 41, 43], [42, 39, 50], [28, 37, 28],
                    [42, 39, 44], [13, 16, 22], [13, 16, 33], [13, 16, 20], [0, 0, 0]]
    np.testing.assert_array_equal(optimistic_cost_table(problem), expected_oct)
    result = schedule(problem, "PEFT")
    assert result.makespan == 122
    np.testing.assert_array_equal(result.proc, [0, 0, 0, 0, 2, 1, 0, 1, 2, 1])
    np.testing.assert_array_equal(result.start, [0, 29, 51, 22, 35, 29, 83, 54, 81, 106])
    validate(problem, result)


# Hand-worked on `independent_example` (a = [2, 5], b = [4, 1], c = [7, 3]; append-only):
# MinMin: best finishes a 2 (P0), b 1 (P1), c 3 (P1): b on P1 [0, 1]. Then a 2 (P0), c min(7, 1+3) = 4:
#   a on P0 [0, 2]. Then c: P0 2+7 = 9, P1 1+3 = 4: P1 [1, 4]. Makespan 4.
# MaxMin: largest best finish c 3: c on P1 [0, 3]. Then a 2 (P0), b min(4, 3+1) = 4 (tie: P0): b on
#   P0 [0, 4]. Then a: P0 4+2 = 6, P1 3+5 = 8: P0 [4, 6]. Makespan 6.
# Sufferage: losses a 5-2 = 3, b 4-1 = 3, c 7-3 = 4: c on P1 [0, 3]. Then a: 8-2 = 6, b: 4-4 = 0: a on
#   P0 [0, 2]. Then b: P0 2+4 = 6, P1 3+1 = 4: P1 [3, 4]. Makespan 4.
# ETF: every start is 0; ties by upward rank (mean cost: a 3.5, b 2.5, c 5): c on P0 [0, 7] (lowest
#   index among equal starts). Then a and b start at 0 on P1; a ranks higher: P1 [0, 5]. Then b: P0 7,
#   P1 5: P1 [5, 6]. Makespan 7.
# MET: fastest processor each: a P0 [0, 2], b P1 [0, 1], c P1 [1, 4].
# OLB: a -> P0 (both free at 0) [0, 2]; b -> P1 (free at 0) [0, 1]; c -> P1 (free at 1, P0 at 2) [1, 4].
# MCT: a: 2 vs 5 -> P0 [0, 2]; b: 6 vs 1 -> P1 [0, 1]; c: 9 vs 4 -> P1 [1, 4].
# MST: a starts at 0 on both -> P0 [0, 2]; b: 2 vs 0 -> P1 [0, 1]; c: 2 vs 1 -> P1 [1, 4].
# FastestNode: totals P0 13, P1 9 -> all on P1 in order a, b, c: [0, 5], [5, 6], [6, 9].
# Duplex: the better of MinMin (4) and MaxMin (6).
HAND_WORKED = {
    "MinMin": ([0, 1, 1], [0, 0, 1]),
    "MaxMin": ([0, 0, 1], [4, 0, 0]),
    "Sufferage": ([0, 1, 1], [0, 3, 0]),
    "ETF": ([1, 1, 0], [0, 5, 0]),
    "MET": ([0, 1, 1], [0, 0, 1]),
    "OLB": ([0, 1, 1], [0, 0, 1]),
    "MCT": ([0, 1, 1], [0, 0, 1]),
    "MST": ([0, 1, 1], [0, 0, 1]),
    "FastestNode": ([1, 1, 1], [0, 5, 6]),
    "Duplex": ([0, 1, 1], [0, 0, 1]),
}


@pytest.mark.parametrize("name", sorted(HAND_WORKED))
def test_hand_worked_independent_tasks(name):
    proc, start = HAND_WORKED[name]
    result = schedule(independent_example(), name)
    np.testing.assert_array_equal(result.proc, proc)
    np.testing.assert_array_equal(result.start, start)


def test_wba_with_zero_alpha_takes_a_least_increase_pair():
    """alpha = 0: only pairs that raise the makespan least are eligible. First step: every finish time
    is an increase from 0, least b on P1 (1); then a on P0 (increase 1: finish 2 over makespan 1);
    then c on P1 (finish 4, increase 2, against 9 on P0)."""
    result = schedule(independent_example(), "WBA", alpha=0.0, seed=5)
    np.testing.assert_array_equal(result.proc, [0, 1, 1])
    np.testing.assert_array_equal(result.start, [0, 0, 1])


def test_wba_is_seeded():
    problem = random_problem(11, max_tasks=20)
    a, b = schedule(problem, "WBA", seed=3), schedule(problem, "WBA", seed=3)
    np.testing.assert_array_equal(a.proc, b.proc)


def test_bad_names_and_options():
    problem = random_problem(0)
    with pytest.raises(ValueError, match="unknown scheduler 'HEFTY'.*CPOP"):
        schedule(problem, "HEFTY")
    with pytest.raises(ValueError, match="unknown option"):
        schedule(problem, "HEFT", insertion_please=True)
    with pytest.raises(ValueError, match="unknown priority"):
        ListConfig(priority="level")
    with pytest.raises(ValueError, match="alpha"):
        ListConfig(alpha=2.0)
    assert set(PRESETS) < set(NAMES)
