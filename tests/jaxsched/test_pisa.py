"""The PISA heatmap: cells replayed by the NumPy reference, files written and read back, the command's
bad input."""

import chex
import jax
import numpy as np
import pytest

from experiments.pisa import findings, main
from jaxsched.adversarial import LEARNED, search_config
from jaxsched.dense import random_instance, to_problem
from jaxsched.listsched import schedule
from jaxsched.pisa import against_best, heatmap_search, judge, load_instances, save_heatmap


@pytest.mark.slow
def test_heatmap_cells_replay_and_round_trip(tmp_path):
    config = search_config("pisa", names=("HEFT", "MET"), chains_per_pair=2, steps=20)
    heatmap = heatmap_search(config, seed=1)
    chex.assert_shape(heatmap.replayed, (2, 2))
    np.testing.assert_allclose(heatmap.searched, heatmap.replayed, rtol=1e-4)
    save_heatmap(heatmap, tmp_path)
    names, replayed, instances = load_instances(tmp_path / "instances.npz")
    assert names == ("HEFT", "MET")
    problem = to_problem(jax.tree.map(lambda x: x[1, 0], instances))  # MET / HEFT cell, recomputed by hand
    ratio = schedule(problem, "MET", ranks="saga").makespan / schedule(problem, "HEFT", ranks="saga").makespan
    np.testing.assert_allclose(replayed[1, 0], ratio, rtol=1e-12)
    assert (tmp_path / "heatmap.md").read_text().startswith("| scheduler")
    # judged against the best of {HEFT, MET} on the MET / HEFT cell, where MET is the worse: HEFT is the best
    # (ratio 1) and MET's ratio is the cell's
    assert heatmap.replayed[1, 0] >= 1.0
    ratios = judge(lambda p: schedule(p, "HEFT", ranks="saga").makespan, heatmap)
    np.testing.assert_allclose(ratios[1, 0], 1.0)  # HEFT beats MET there: it is the best heuristic itself
    met = judge(lambda p: schedule(p, "MET", ranks="saga").makespan, heatmap)
    np.testing.assert_allclose(met[1, 0], heatmap.replayed[1, 0], rtol=1e-12)
    with pytest.raises(FileNotFoundError, match="no heatmap"):
        load_instances(tmp_path / "missing.npz")


@pytest.mark.slow
def test_a_network_searched_against_is_replayed_by_its_host_scheduler(tmp_path):
    """DeepSched (untrained, random weights) as the judged scheduler: only its pairs are searched, each
    cell replays through `NeuralScheduler.schedule`, and `against_best` divides by the best other scheduler
    (recomputed here)."""
    from jaxsched.deepsched import CONFIGS, DeepSchedNet, NeuralScheduler, dense_features

    config = search_config("pisa", names=("HEFT", "MET", LEARNED), targets=(LEARNED,), chains_per_pair=2, steps=20)
    model = CONFIGS["test"].replace(model={"recurrence": "mingru"})
    features = jax.eval_shape(dense_features, random_instance(jax.random.key(0), 5, 5))
    shapes = jax.eval_shape(DeepSchedNet(model.model).init, jax.random.key(1), features)
    rng = np.random.default_rng(2)
    params = jax.tree.map(lambda s: np.asarray(rng.normal(0.0, 0.5, s.shape), s.dtype), shapes)
    network = NeuralScheduler(model, params)
    heatmap = heatmap_search(config, seed=1, learned=network)
    assert np.isnan(heatmap.replayed[:2, :2][~np.eye(2, dtype=bool)]).all()
    np.testing.assert_allclose(heatmap.searched[2, :2], heatmap.replayed[2, :2], rtol=1e-4)
    best = against_best(heatmap, LEARNED, network)
    for b in range(2):
        problem = to_problem(jax.tree.map(lambda x, b=b: x[2, b], heatmap.instances))
        mine = network.schedule(problem).makespan
        np.testing.assert_allclose(
            heatmap.replayed[2, b], mine / schedule(problem, config.names[b], ranks="saga").makespan
        )
        others = min(schedule(problem, n, ranks="saga").makespan for n in ("HEFT", "MET"))
        np.testing.assert_allclose(best[b], mine / others, rtol=1e-12)
    rows = save_heatmap(heatmap, tmp_path)[1].read_text().splitlines()[2:]  # under the header: DeepSched's row only
    assert len(rows) == 1 and rows[0].startswith("| DeepSched |")


def test_findings_read_the_table():
    table = np.array([[1.0, 4.5, 2.0], [1.5, 1.0, 6.0], [1.2, 1.1, 1.0]])
    lines = findings(("HEFT", "FastestNode", "MET"), table)
    assert lines[0].startswith("HEFT / FastestNode: 4.50")
    assert "1.20 (MET" in lines[1] and "1 of 3" in lines[2]


@pytest.mark.parametrize(
    "argv",
    [
        ["--preset", "pisa-1999"],
        ["--restarts", "0"],
        ["--names", "HEFT", "GA"],
        ["--no-heatmap"],
        ["--deepsched", "no/such/checkpoint"],
    ],
)
def test_bad_input_exits_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
