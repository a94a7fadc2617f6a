import json

import numpy as np
import pytest

from experiments import list_schedulers
from experiments.list_schedulers import ComparisonConfig, compare, summarise


def test_compare_resumes_and_summarises(tmp_path):
    pytest.importorskip("wfcommons")  # extra `workflows`
    config = ComparisonConfig(instances=1, num_tasks=8, num_procs=2, names=("HEFT", "MET"))
    path = tmp_path / "records.jsonl"
    records = compare(config, path)
    lines = path.read_text().splitlines()
    assert len(lines) == len(records) and all(json.loads(line)["makespan"] > 0 for line in lines)
    assert compare(config, path) == records  # resumed: nothing rerun
    assert path.read_text().splitlines() == lines
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # killed mid-write
    assert [r["scheduler"] for r in compare(config, path)] == [r["scheduler"] for r in records]
    assert len(path.read_text().splitlines()) == len(lines)
    families, ratios, seconds = summarise(records, config.names)
    assert ratios.shape == (len(families), 2) and seconds.shape == (2,)
    assert np.all(ratios >= 1) and np.all(ratios.min(axis=1) == 1)  # one instance: the best has ratio 1


def test_experiment_refuses_another_configuration(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"instances": 99}))
    with pytest.raises(SystemExit) as exit_info:
        list_schedulers.main(["--config", "test", "--workdir", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "holds results of a different run" in error and "instances" in error
    with pytest.raises(SystemExit):
        list_schedulers.main(["--config", "huge"])


def test_bad_comparison_config():
    with pytest.raises(ValueError, match="unknown scheduler"):
        ComparisonConfig(names=("HEFT", "BIL"))
