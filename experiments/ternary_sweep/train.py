"""The ternary sparsification study end to end: `train_and_evaluate(study, workdir)`.

Each quantizer group (the baselines, then every ternary member of the study) trains as one vmapped
program with per-epoch orbax checkpoints under `workdir/checkpoints/<kind>`, so rerunning the same
call resumes after a kill (another study in the same workdir is refused). The log-regime model is exported in
every format and reloaded.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments.ternary_sweep.configs import Study, ternary_members
from experiments.ternary_sweep.report import cap_rows, check_targets, report_markdown, table_rows
from jaxquant import (
    Dataset,
    ModelConfig,
    QuantConfig,
    ResNet,
    SweepMember,
    SweepResult,
    available_formats,
    compression_report,
    count_params,
    evaluate_model,
    export_model,
    load_dataset,
    load_model,
    quantized_codes,
    run_sweep,
    summarize,
)
from jaxsched.common import Devices, Workdir


class StudyResult(NamedTuple):
    """What `train_and_evaluate` produced: the JSON-ready summary, the report and the raw sweeps."""

    summary: dict  # configuration, table, caps, runs, compression, targets, histories, seconds
    report: str  # markdown (table.md)
    results: dict[str, SweepResult]  # per quantizer group


def parameter_count(model_config: ModelConfig, dataset: Dataset) -> int:
    """Trainable parameters of the ResNet `model_config` on `dataset`'s images (no compute: shapes only)."""
    images = jnp.zeros((1,) + dataset.image_shape, jnp.float32)
    shapes = jax.eval_shape(lambda: ResNet(model_config).init(jax.random.key(0), images, delta=0.1, train=False))
    return count_params(shapes["params"])


def export_log_model(study: Study, result: SweepResult, dataset: Dataset, out: Path) -> dict | None:
    """Export the first log-regime member at the study's cap in every format this install writes; reload the most
    compact one and evaluate it."""
    index = next((i for i, m in enumerate(result.members)
                  if m.regime == "log" and m.delta_max == study.delta_max and m.seed == study.seeds[0]), None)
    if index is None:
        return None
    take = lambda tree: jax.tree.map(lambda leaf: leaf[index], tree)  # noqa: E731
    variables = {"params": take(result.state.params), "batch_stats": take(result.state.batch_stats)}
    delta = float(result.history.delta[-1, index])
    model_config = dataclasses.replace(study.train.model, quant=QuantConfig("ternary"))
    codes = quantized_codes(variables["params"], model_config.quant, delta)
    report = compression_report(codes)
    (out / "models").mkdir(parents=True, exist_ok=True)
    report["files"] = {}
    formats = available_formats()  # "ans" only with constriction installed
    for fmt in formats:
        path = out / "models" / f"log_regime_{fmt}.npz"
        report["files"][fmt] = export_model(path, variables, model_config, delta, fmt=fmt)["file_bytes"]
    report["reloaded_format"] = formats[-1]
    model, loaded = load_model(out / "models" / f"log_regime_{formats[-1]}.npz")
    report["reloaded_accuracy"] = evaluate_model(model, loaded, dataset, batch_size=study.train.eval_batch_size)
    report["trained_accuracy"] = float(result.history.test_accuracy[-1, index])
    return report


def train_and_evaluate(study: Study, workdir: str | Path, *, progress: bool = False, devices: Devices = None
                       ) -> StudyResult:
    """Run every group of `study` (checkpointed under `workdir`; members split across `devices`, default all),
    export the log-regime model, and build the summary and report. With `progress`, show a bar per group and
    print its time. Raises `ConfigMismatch` when `workdir` holds results of another study."""
    dataset = load_dataset(study.train.dataset, study.train.data_dir)  # a bad data path: no workdir made
    out = Workdir(workdir, study).path
    params = parameter_count(study.train.model, dataset)
    start = time.time()
    roles = ternary_members(study)
    groups = {kind: [SweepMember(seed=s) for s in study.seeds] for kind in study.baselines}
    groups["ternary"] = [m for members in roles.values() for m in members]
    results = {}
    for kind, members in groups.items():
        config = dataclasses.replace(study.train, model=dataclasses.replace(study.train.model, quant=QuantConfig(kind)))
        group_start = time.time()
        results[kind] = run_sweep(config, members, workdir=out / "checkpoints" / kind, dataset=dataset,
                                  progress=progress, devices=devices)
        if progress:
            print(f"{kind}: {len(members)} member(s) in one vmapped program, {time.time() - group_start:.0f} s")
    rows = {kind: summarize(result) for kind, result in results.items()}
    table = table_rows(study, rows)
    compression = export_log_model(study, results["ternary"], dataset, out)
    targets = check_targets(table, compression)
    caps = cap_rows(study, rows)
    summary = {
        "study": dataclasses.asdict(study), "parameters": params, "table": table, "caps": caps, "runs": rows,
        "compression": compression, "targets": targets, "seconds": time.time() - start,
        "histories": {kind: {name: np.asarray(column).T.tolist() for name, column in result.history._asdict().items()}
                      for kind, result in results.items()},
    }
    return StudyResult(summary, report_markdown(study, table, rows, compression, targets, params, caps), results)
