"""Every GPU row of docs/benchmarks.md in one command: one table (row, figure, target, verdict, device, jax) and JSON.

    python -m benchmarks.gpu --out gpu.json                    # on a GPU machine (pip install ".[cuda12]")
    python -m benchmarks.gpu --rows quant-sweep,quant-throughput --row-timeout 120
    python -m benchmarks.gpu --smoke                           # the same code at tiny sizes on CPU (seconds a row)

Each row runs in its own process (`--child ROW`, printing its result as JSON) under a time limit: the smaller of
its own limit (`ROWS`, or --row-timeout) and what is left of --budget; a row that runs out, fails or has no time
left says so in the table and the next row goes on. The rows call the benchmarks' own functions at sizes chosen to
finish, compilation included, in about twelve minutes on one H100 (limits in seconds measured there). Exit status:
0 with every row run (met or not), 1 when a row timed out or failed, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Callable, NamedTuple


class Row(NamedTuple):
    """One row: what it measures against (`target`), its time limit on one H100, and `run(smoke) -> result`
    (a dict with `figure`, a one-line summary, `met`: True, False or None without a target, and any numbers)."""

    target: str
    limit_s: float
    run: Callable[[bool], dict]


def _capture(fn: Callable[[], object]) -> str:
    """What `fn` prints, for the rows whose benchmark reports only by printing."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        fn()
    return buffer.getvalue()


def _table_row(text: str, first: str) -> list[str]:
    """The cells of the markdown table row of `text` whose first cell starts with `first`."""
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first):
            return cells
    raise ValueError(f"no table row starting with {first!r} in:\n{text[-2000:]}")


def _number(cell: str) -> float:
    return float(re.sub(r"[^0-9.eE+-]", "", cell))


# JaxEnv: full-size ResNet-18, 8,192 environments, a uniformly random agent, TASO's cost
def _jax_env(table: str) -> Callable[[bool], dict]:
    """The row of JaxEnv with the rules of `table` (benchmarks.jax_env.TABLES: hand, taso, doubled)."""
    def run(smoke: bool) -> dict:
        from benchmarks.jax_env import measure_table

        model, envs, steps = ("squeezenet1_1", 4, 2) if smoke else ("resnet18", 8192, 32)
        out = measure_table(model, envs, table, steps=steps, repeats=1 if smoke else 2)
        rate, compile_s = out["steps_per_s"], out["compile_s"]
        return dict(figure=f"{rate:,.0f} steps/s ({model}, {envs} envs), compile {compile_s:.1f} s",
                    met=rate >= 1e6 and (table == "hand" or compile_s <= 60), steps_per_s=rate, compile_s=compile_s)
    return run


def _dream(smoke: bool) -> dict:
    from benchmarks import dream

    batch = 64 if smoke else 262_144
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "dream.json")
        _capture(lambda: dream.main(["--batches", str(batch), "--repeats", "1" if smoke else "3", "--json", path]))
        with open(path) as file:
            rate = json.load(file)["rows"][0]["steps_per_s"]
    return dict(figure=f"{rate:,.0f} dream steps/s at {batch:,}", met=rate >= 1e6, steps_per_s=rate)


def _ga(smoke: bool) -> dict:
    from benchmarks import ga

    sizes = ["--tasks", "30", "--procs", "4", "--population", "20"] if smoke else ["--population", "1000"]
    argv, sys.argv = sys.argv, ["ga", *sizes, "--repeats", "2"]  # the best of 2: numba compiles in the first
    try:
        text = _capture(ga.main)
    finally:
        sys.argv = argv
    speedup = _number(_table_row(text, "JAX")[2])
    numba = _number(_table_row(text, "numba")[2])
    return dict(figure=f"JAX {speedup:.1f}x NumPy, numba {numba:.1f}x ({os.cpu_count()} cores), population "
                       f"{20 if smoke else 1000}", met=speedup >= 20, jax_speedup=speedup, numba_speedup=numba)


def _ppo_epoch(smoke: bool) -> dict:
    from benchmarks import jax_ppo_epoch

    envs = 8 if smoke else 4096
    out = jax_ppo_epoch.epoch_seconds(envs, "onnxruntime")
    return dict(figure=f"{out['steps_per_s']:,.0f} env steps/s with the update at {envs} envs; compile "
                       f"{out['compile']:.1f} s", met=None, **out)


# jaxquant: ResNet-20 on CIFAR-shaped random data, 8 members, the vmap conv paths side by side
QUANT_PATHS = ("grouped", "im2col")


def _quant_setup(smoke: bool, batch: int, steps: int):
    import dataclasses

    import jaxquant as jq
    from benchmarks.sweep import cifar_shaped, sweep_config

    config = sweep_config("resnet20", epochs=1)
    if smoke:
        config = dataclasses.replace(config, model=jq.ModelConfig(blocks_per_stage=1, base_width=4))
        batch, steps = 16, 2
    config = dataclasses.replace(config, batch_size=batch, eval_batch_size=min(1000, 8 * batch))
    dataset = cifar_shaped(train=batch * steps, test=config.eval_batch_size)
    return config, dataset, (2 if smoke else 8), (("loop", "im2col") if smoke else QUANT_PATHS)


def _quant_sweep(smoke: bool) -> dict:
    from benchmarks.sweep import sweep_seconds

    config, dataset, k, paths = _quant_setup(smoke, 128, 40)
    out = sweep_seconds(config, dataset, k, 1 if smoke else 2, paths)
    one = out["sequential"] / k
    ratios = {path: out[f"vmapped {path}"] / one for path in paths}
    figure = ", ".join(f"{path} {ratio:.2f}x" for path, ratio in ratios.items())
    return dict(figure=f"{k} members / one run: {figure} (one run {one:.2f} s)", met=ratios[paths[-1]] <= 3,
                ratios=ratios, **{key: value for key, value in out.items() if not key.startswith("drift")})


def _quant_throughput(smoke: bool) -> dict:
    import dataclasses

    import jaxquant as jq
    from benchmarks.quant_throughput import throughput
    from benchmarks.sweep import with_vmap_conv

    config, dataset, k, paths = _quant_setup(smoke, 256, 10)
    config = dataclasses.replace(config, model=dataclasses.replace(config.model, quant=jq.QuantConfig("ternary")))
    epochs = 1 if smoke else 2
    rates = {"one member": throughput(config, dataset, 1, epochs)[0]}
    rates |= {path: throughput(with_vmap_conv(config, path), dataset, k, epochs)[0] for path in paths}
    figure = ", ".join(f"{name} {rate:,.0f}" for name, rate in rates.items())
    return dict(figure=f"images/s: {figure} ({k} members)", met=rates[paths[-1]] > rates["one member"],
                images_per_s=rates)


def _list_schedulers(smoke: bool) -> dict:
    from benchmarks.list_schedulers import end_to_end_times

    sizes = (16, 10, 2) if smoke else (8192, 100, 4)
    names = ("HEFT",) if smoke else ("HEFT", "CPOP", "PEFT", "MinMin", "MCT")
    times = end_to_end_times(names, *sizes, repeats=1 if smoke else 2)
    heft = times["HEFT"]
    figure = "; ".join(f"{name} {t['end_to_end_s']:.3f}/{t['kernel_s']:.4f} s, host {t['host_us_per_instance']:.1f} us"
                       for name, t in times.items())
    return dict(figure=f"end to end/kernel at {sizes[0]:,} x {sizes[1]} x {sizes[2]}: {figure}",
                met=heft["end_to_end_s"] <= 3 * heft["kernel_s"], times=times)


def _sharded_sweep(smoke: bool, devices: int | None = None) -> dict:
    from benchmarks import sharding

    sizes = ["--members", "2", "--envs", "8", "--ppo-epochs", "1", "--repeats", "1", "--host-devices", "2"] \
        if smoke else ["--members", "8", "--envs", "256", "--ppo-epochs", "2", "--repeats", "2", "--host-devices", "0"]
    if devices:
        sizes += ["--devices", str(devices)]
    text = _capture(lambda: sharding.main(sizes))
    count = int(re.search(r"(\d+) devices\n", text).group(1))
    cells = _table_row(text, "jaxquant sweep")
    speedup = _number(cells[3])
    return dict(figure=f"jaxquant sweep on {count} device(s) {speedup:.2f}x one device",
                met=speedup >= 1.6 if count > 1 else None, devices=count, speedup=speedup)


def _deepsched(smoke: bool) -> dict:
    import jax
    import numpy as np

    from experiments.deepsched.evaluate import timing  # the study's timing table, one variant at one size
    from jaxsched import Problem
    from jaxsched.deepsched import CONFIGS, DeepSchedNet, NeuralScheduler, bucket_shape, problem_features

    tasks, procs = (50, 4) if smoke else (10_000, 188)
    config = CONFIGS["default"]
    config = config.replace(eval=dict(timing_sizes=(tasks,), timing_procs=procs, ga=False, variants=("paper",)))
    one_task = Problem(np.ones((1, 1)), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    params = DeepSchedNet(config.model).init(jax.random.key(0), problem_features(one_task, bucket_shape(one_task)))
    row = timing({"paper": NeuralScheduler(config, params)}, config, progress=False)[0]
    speedup = row["heft"] / row["paper"]
    return dict(figure=f"network {row['paper']:.4f} s vs HEFT {row['heft']:.4f} s at {tasks} x {procs} "
                       f"({speedup:.1f}x)", met=speedup >= 10, **row)


def _heft_labels(smoke: bool) -> dict:
    from benchmarks import heft

    batch, tasks, procs = (4, 10, 2) if smoke else (2048, 100, 16)
    cells = _table_row(_capture(lambda: heft.compare_batched(batch, tasks, procs, 1 if smoke else 2)), "JAX")
    rate = _number(cells[2])
    return dict(figure=f"{rate:,.0f} label DAGs/s of {tasks} x {procs} (batch {batch})", met=rate >= 100_000,
                dags_per_s=rate, equal=cells[4] == "True")


# In the order they run: the JaxEnv rows with TASO's table last, as their compilation may take what is left.
ROWS = {
    "jax-env": Row(">= 1e6 steps/s", 60, _jax_env("hand")),
    "dream": Row(">= 1e6 steps/s", 25, _dream),
    "ga": Row(">= 20x NumPy", 45, _ga),
    "ppo-epoch": Row("-", 120, _ppo_epoch),
    "quant-sweep": Row("<= 3x one run (im2col)", 110, _quant_sweep),
    "quant-throughput": Row("8 members > one (im2col)", 100, _quant_throughput),
    "list-schedulers": Row("end to end <= 3x kernel", 45, _list_schedulers),
    "sharded-sweep": Row(">= 1.6x on 2+ devices", 45, _sharded_sweep),
    "deepsched": Row(">= 10x HEFT", 40, _deepsched),
    "heft-labels": Row(">= 100,000 DAGs/s", 30, _heft_labels),
    "jax-env-full": Row(">= 1e6 steps/s, compile <= 60 s", 150, _jax_env("taso")),
    "jax-env-doubled": Row(">= 1e6 steps/s, compile <= 60 s", 200, _jax_env("doubled")),
}
MARK = "GPU-ROW "


def _child(name: str, smoke: bool, devices: int | None) -> int:
    """Run one row here and print its result (and the device and jax version) as one JSON line."""
    start = time.perf_counter()
    result = _sharded_sweep(smoke, devices) if name == "sharded-sweep" else ROWS[name].run(smoke)
    import jax  # after the row: the sharded sweep sets its host devices before jax starts

    device = jax.devices()[0]
    result |= dict(seconds=time.perf_counter() - start, device=f"{device.platform} ({device.device_kind})",
                   jax=jax.__version__)
    print(MARK + json.dumps(result, default=float), flush=True)
    return 0


def _devices() -> dict:
    """The machine's devices, asked of a child process (so this one never holds the accelerator)."""
    code = ("import json, jax; d = jax.devices(); "
            "print(json.dumps(dict(count=len(d), kind=f'{d[0].platform} ({d[0].device_kind})', jax=jax.__version__)))")
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_row(name: str, smoke: bool, timeout: float, devices: int | None) -> dict:
    """One row in its own process under `timeout` seconds: its result, or why there is none."""
    command = [sys.executable, "-m", "benchmarks.gpu", "--child", name] + ["--smoke"] * smoke
    command += ["--devices", str(devices)] if devices else []
    env = dict(os.environ, **({"JAX_PLATFORMS": "cpu"} if smoke else {}))
    start = time.perf_counter()
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return dict(figure=f"ran out of its {timeout:.0f} s", verdict="timed out", seconds=timeout)
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARK)]
    if out.returncode != 0 or not lines:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return dict(figure=f"failed: {last[:200]}", verdict="error", seconds=time.perf_counter() - start,
                    log=out.stderr[-4000:])
    result = json.loads(lines[-1][len(MARK):])
    result["verdict"] = {True: "met", False: "not met", None: "-"}[result["met"]]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows of: {', '.join(ROWS)}")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on CPU (checks the code, not the speed)")
    parser.add_argument("--out", default=None, help="also write the table as JSON to this file")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds for all rows together (default: 520; with --smoke 3600)")
    parser.add_argument("--row-timeout", type=float, default=None, help="seconds per row (default: each row's own)")
    parser.add_argument("--devices", type=int, default=None, help="devices of the sharded sweep (default: all)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [name for name in args.rows.split(",") if name]
    unknown = sorted(set(names) - set(ROWS)) + ([args.child] if args.child and args.child not in ROWS else [])
    args.budget = args.budget or (3600 if args.smoke else 520)
    if unknown or not names or args.budget <= 0 or (args.row_timeout or 1) <= 0 or (args.devices or 1) < 1:
        print(f"gpu: unknown rows {unknown} (expected some of {', '.join(ROWS)}), or a non-positive budget, "
              "timeout or device count", file=sys.stderr)
        return 2
    if args.child:
        return _child(args.child, args.smoke, args.devices)
    machine = _devices() if not args.smoke else None
    if machine and args.devices and args.devices > machine["count"]:
        print(f"gpu: --devices {args.devices} but this machine has {machine['count']}", file=sys.stderr)
        return 2
    print(f"# {machine['count']} x {machine['kind']}, jax {machine['jax']}" if machine else "# smoke run on CPU")
    print("| row | figure | target | verdict | device | jax | s |\n|---|---|---|---|---|---|---|", flush=True)
    deadline, results = time.monotonic() + args.budget, {}
    for name in names:
        left = deadline - time.monotonic()
        limit = min(args.row_timeout or (5 * ROWS[name].limit_s if args.smoke else ROWS[name].limit_s), left)
        result = run_row(name, args.smoke, limit, args.devices) if limit >= 5 else dict(
            figure="no time left in the budget", verdict="skipped", seconds=0.0)
        results[name] = dict(target=ROWS[name].target, **result)
        print(f"| {name} | {result['figure']} | {ROWS[name].target} | {result['verdict']} | "
              f"{result.get('device', '-')} | {result.get('jax', '-')} | {result['seconds']:.0f} |", flush=True)
    if args.out:
        with open(args.out, "w") as file:
            json.dump({"machine": machine, "smoke": args.smoke, "rows": results}, file, indent=1, default=float)
    return 1 if any(r["verdict"] in ("timed out", "error", "skipped") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
