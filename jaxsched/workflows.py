"""Scheduling problems from WfCommons workflow recipes (extra `workflows`), generated offline.

WfCommons (wfchef recipes) synthesises realistic scientific workflows (Montage, Epigenomics,
Cycles, ...) with task runtimes and input/output files. Each task's runtime becomes its mean
execution time, spread over processors by Topcuoglu's heterogeneity rule, and each edge's transfer
time is the size of the files the child reads from the parent divided by `bandwidth_bytes`.
"""

from __future__ import annotations

import random

import numpy as np

from jaxsched.problem import Problem

RECIPES = (
    "blast",
    "bwa",
    "cycles",
    "epigenomics",
    "genome",
    "montage",
    "seismology",
    "soykb",
    "srasearch",
)  # rnaseq is left out: its recipe produces no edges


def wfcommons_problem(
    recipe: str,
    num_tasks: int,
    num_procs: int,
    *,
    beta: float = 1.0,
    bandwidth_bytes: float = 1e7,
    seed: int = 0,
) -> Problem:
    """A Problem from WfCommons recipe `recipe` (one of RECIPES) with about `num_tasks` tasks.

    WfCommons draws from Python's and NumPy's global generators; they are seeded with `seed` for the
    call and restored afterwards, so the result is deterministic and the caller's state untouched.
    """
    try:
        import wfcommons.wfchef.recipes as recipes
        from wfcommons import WorkflowGenerator
    except ImportError as error:
        message = "WfCommons workflows need the extra: pip install 'jax-research-systems[workflows]'"
        raise ImportError(message) from error
    if recipe not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}")
    if not 0 <= beta <= 2:
        raise ValueError(f"beta must lie in [0, 2], got {beta}")
    recipe_class = getattr(recipes, recipe.capitalize() + "Recipe")
    python_state, numpy_state = random.getstate(), np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed)
        workflow = WorkflowGenerator(recipe_class.from_num_tasks(num_tasks)).build_workflow()
    except ValueError as error:  # e.g. fewer tasks than the recipe's smallest base graph
        raise ValueError(f"WfCommons cannot build recipe {recipe!r} with {num_tasks} tasks: {error}") from error
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
    names = sorted(workflow.nodes)
    index = {name: i for i, name in enumerate(names)}
    runtime = np.array([max(float(workflow.tasks[n].runtime), 0.0) for n in names])
    src, dst, data = [], [], []
    for parent, child in sorted(workflow.edges):
        produced = {f.file_id: f.size for f in workflow.tasks[parent].output_files}
        shared = sum(f.size for f in workflow.tasks[child].input_files if f.file_id in produced)
        src.append(index[parent])
        dst.append(index[child])
        data.append(shared / bandwidth_bytes)
    if not src:
        raise ValueError(f"recipe {recipe!r} produced a workflow without dependencies")
    rng = np.random.default_rng(seed)
    comp = runtime[:, None] * rng.uniform(1 - beta / 2, 1 + beta / 2, size=(len(names), num_procs))
    return Problem(comp=comp, src=np.array(src), dst=np.array(dst), data=np.array(data))
