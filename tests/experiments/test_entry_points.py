"""Every experiment name of the README still runs as `python -m experiments.<name>`: a module or a package with a
`__main__`, whose `main(["--help"])` prints its flags and exits 0 (in process: no experiment runs)."""

import importlib
import importlib.util

import pytest

NAMES = ("schedule_demo", "deepsched", "list_schedulers", "autotune", "ternary_sweep", "graphopt_rl")


@pytest.mark.parametrize("name", NAMES)
def test_each_experiment_runs_as_a_module_and_prints_help(name, capsys):
    spec = importlib.util.find_spec(f"experiments.{name}")
    assert spec is not None
    if spec.submodule_search_locations is not None:  # a package: `python -m` runs its __main__
        assert importlib.util.find_spec(f"experiments.{name}.__main__") is not None
    module = importlib.import_module(f"experiments.{name}")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert "--help" in capsys.readouterr().out
