"""The PISA heatmap: cells replayed by the NumPy reference, files written and read back, the command's
bad input."""

import chex
import jax
import numpy as np
import pytest

from experiments.pisa import findings, main
from jaxsched.adversarial import search_config
from jaxsched.dense import to_problem
from jaxsched.listsched import schedule
from jaxsched.pisa import heatmap_search, judge, load_instances, save_heatmap


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


def test_findings_read_the_table():
    table = np.array([[1.0, 4.5, 2.0], [1.5, 1.0, 6.0], [1.2, 1.1, 1.0]])
    lines = findings(("HEFT", "FastestNode", "MET"), table)
    assert lines[0].startswith("HEFT / FastestNode: 4.50")
    assert "1.20 (MET" in lines[1] and "1 of 3" in lines[2]


@pytest.mark.parametrize("argv", [["--preset", "pisa-1999"], ["--restarts", "0"], ["--names", "HEFT", "GA"]])
def test_bad_input_exits_2_with_one_line(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
