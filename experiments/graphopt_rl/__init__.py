"""The graph-optimization agents' study (seed 004, thesis chapter 5): `configs` (the presets `test`, `default`,
`full`), `settings` (the research and deployment settings), `baselines` (the searches), `study` (the driver,
`run_study(config, workdir)`), `timing` (latencies and step times), `jitted_agent` (the research setting's jitted
multi-graph agent), `generalise` (an agent trained on generated graphs, evaluated on unseen ones), `report` (tables,
targets, figures) and `main` (the flags); `python -m experiments.graphopt_rl --help` lists them."""

from experiments.graphopt_rl.baselines import reachable_optimum
from experiments.graphopt_rl.configs import CONFIGS, IMPORTED_BERT, GraphoptConfig, build_graph
from experiments.graphopt_rl.generalise import (
    GeneralistConfig,
    UnseenResult,
    evaluate_unseen,
    evaluation_steps,
    train_generalist,
    training_graphs,
)
from experiments.graphopt_rl.main import main
from experiments.graphopt_rl.report import judge_research, judge_targets, plot_results, results_table
from experiments.graphopt_rl.settings import SETTINGS, Setting, setting
from experiments.graphopt_rl.study import run_study
from experiments.graphopt_rl.timing import dream_step_seconds, latencies, step_time

__all__ = ["CONFIGS", "IMPORTED_BERT", "SETTINGS", "GeneralistConfig", "GraphoptConfig", "Setting", "UnseenResult",
           "build_graph", "dream_step_seconds", "evaluate_unseen", "evaluation_steps", "judge_research",
           "judge_targets", "latencies", "main", "plot_results", "reachable_optimum", "results_table", "run_study",
           "setting", "step_time", "train_generalist", "training_graphs"]
