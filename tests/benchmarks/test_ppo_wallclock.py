"""The wall-clock race of benchmarks/ppo_wallclock.py on the toy graph, whose optimum is known by construction:
the target is that optimum, no trainer returns anything cheaper, each stops at its first evaluation that reaches
the target or passes the cap, and the clocks add up."""

import importlib.util
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from experiments.graphopt_rl import CONFIGS
from jaxgraph import RULES, Roofline, cost
from jaxgraph.rl import toy_graph


def _load_script():
    path = Path(__file__).parents[2] / "benchmarks" / "ppo_wallclock.py"
    spec = importlib.util.spec_from_file_location("ppo_wallclock", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


script = _load_script()
Clock, Evaluation, TrainerRun, race, wallclock_table = (script.Clock, script.Evaluation, script.TrainerRun,
                                                        script.race, script.wallclock_table)

TOY = toy_graph(2)
TOY_RULES = RULES[:2]  # FuseConvRelu and FuseConvBatchNorm (stride 1, SAME): the toy's rewrites; few rules compile fast


def check_run(run, target, time_cap):
    assert run.evaluations and run.seconds >= run.evaluations[-1].seconds
    assert 0 < run.compile_seconds <= run.seconds and 0 < run.evaluation_seconds <= run.seconds  # they overlap: a
    # first evaluation compiles the acting functions
    steps = [e.env_steps for e in run.evaluations]
    assert steps == sorted(steps) and steps[0] > 0
    assert run.best_cost >= target * (1 - 1e-5)  # the optimum cannot be beaten
    *earlier, last = run.evaluations
    assert all(e.cost > target * (1 + 1e-5) and e.seconds < time_cap for e in earlier)
    assert run.reached == last if last.cost <= target * (1 + 1e-5) else (run.reached is None and
                                                                          last.seconds >= time_cap)


def test_clock_stops_at_the_target_or_the_cap_and_counts_compilation():
    clock = Clock("test", target=1.0, time_cap=3600.0)
    try:
        jax.jit(lambda x: jnp.sin(x) * 3.0 + x)(jnp.arange(7.0)).block_until_ready()
        with clock.evaluating():
            time.sleep(0.01)
        assert not clock.record(10, 1.5) and clock.record(20, 1.0 + 1e-7)
        run = clock.run()
    finally:
        clock.close()
    assert 0 < run.compile_seconds <= run.seconds - 0.01 and run.evaluation_seconds >= 0.01  # the sleep is no compile
    assert run.reached.env_steps == 20 and run.best_cost == 1.0 + 1e-7
    capped = Clock("capped", target=1.0, time_cap=1e-9)
    capped.close()
    assert capped.record(5, 2.0) and capped.run().reached is None


def test_table_states_reached_and_missed_targets():
    """Hand-made runs: one reached the target (0.5) at its second evaluation, one stopped at the cap above it."""
    reached = TrainerRun("host_env", [Evaluation(10.0, 100, 0.6), Evaluation(21.5, 250, 0.5)], 21.6, 12.3, 4.0,
                         0.5, 0)
    missed = TrainerRun("world_model", [Evaluation(30.0, 800, 0.55), Evaluation(61.0, 900, 0.52)], 61.2, 20.0, 2.0,
                        0.5, 2560)
    table = wallclock_table({"taso_cost": 0.5, "runs": {"host_env": reached, "world_model": missed}}, 60.0)
    lines = table.splitlines()
    assert lines[2] == "| PPO on Env (host) | 250 | 21.5 | 12.3 | 4.0 | 2 | 0.50000 (+0.00%) |"
    assert lines[3] == ("| world model (Env data, dream PPO) | 900 (+ 2,560 dream) | not reached in 60 s cap (stopped "
                        "at 61.2) | 20.0 | 2.0 | 2 | 0.52000 (+4.00%) |")


@pytest.mark.slow
def test_host_trainers_race_to_the_toy_optimum():
    """PPO on Env and the world-model agent (about 2 minutes under load on 2 cores: their compilations)."""
    config = CONFIGS["test"]
    cost_model = Roofline()
    result = race(TOY.graph, config, cost_model, 20.0,
                  jax.random.key(0), rules=TOY_RULES, trainers=("host_env", "world_model"), chunk_updates=2)
    target = cost(TOY.optimal_graph)
    assert result["taso_cost"] == pytest.approx(target, rel=1e-9)
    assert result["optimum"]["cost"] == pytest.approx(target, rel=1e-9) and result["optimum"]["exhausted"]
    assert result["initial_cost"] == pytest.approx(cost(TOY.graph), rel=1e-9)
    for run in result["runs"].values():
        check_run(run, target, 20.0)
    assert result["runs"]["world_model"].dream_steps % (2 * 8 * 4) == 0  # chunks of 2 updates x 8 dreams x 4 steps
    table = wallclock_table(result, 20.0)
    assert table.count("\n") == 3 and "PPO on Env (host)" in table and "world model" in table
    with pytest.raises(ValueError, match="trainers"):
        race(TOY.graph, config, cost_model, 1.0, jax.random.key(0), trainers=("nope",))


@pytest.mark.slow
def test_jitted_trainer_races_to_the_toy_optimum():
    """PPO on JaxEnv: one compilation of the training chunk and one of the evaluation (about 2 minutes under
    load on 2 cores)."""
    result = race(TOY.graph, CONFIGS["test"], Roofline(), 60.0, jax.random.key(0), rules=TOY_RULES,
                  trainers=("jax_env",))
    run = result["runs"]["jax_env"]
    check_run(run, cost(TOY.optimal_graph), 60.0)
    assert run.dream_steps == 0 and "PPO on JaxEnv" in wallclock_table(result, 60.0)


def test_script_refuses_bad_arguments(capsys):
    """A bad time cap or trainer is one line on stderr and exit status 2."""
    assert script.main(["--time-cap", "0", "--trainers", "host_env"]) == 2
    assert script.main(["--trainers", "host_env,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("--time-cap > 0" in line and "--trainers among" in line for line in err)
