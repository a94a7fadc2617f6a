"""The autotuning study's report: the measured and simulated tables, the Gantt charts and the simulation figure."""

from __future__ import annotations

from pathlib import Path

from jaxsched.autotune import STAGES, Machine, Trace, gantt


def markdown(results: dict) -> str:
    """The measured table and the simulation table."""
    lines = [
        "| policy | makespan s | vs sequential | CPU busy | CPU idle s | device busy | device idle s "
        "| slowdown propose/build/profile/update | tuned quality vs seq. | profiling error (tuned / alone) "
        "| replayed s (error) "
        "| predicted s (error) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy, r in results["measured"].items():
        slow = "/".join(f"{r['stage_slowdown'][s]:.2f}" for s in STAGES)
        lines.append(
            f"| {policy} | {r['makespan_s']:.1f} | {r['speedup_vs_sequential']:.2f}x | {r['cpu_busy']:.0%} | "
            f"{r['cpu_idle_s']:.1f} | {r['device_busy']:.0%} | {r['device_idle_s']:.1f} | {slow} | "
            f"{r['tuned_quality_vs_sequential']:.3f} | {r['profiling_error']:.1%} ({r['tuned_over_alone']:.2f}) | "
            f"{_seconds_and_error(r['replayed_makespan_s'], r['replay_error'])} | "
            f"{_seconds_and_error(r['predicted_makespan_s'], r['prediction_error'])} |"
        )
    lines += [
        "",
        f"Simulator study (`parallel` with fitted interference {results['fitted_interference']:.2f}):",
        "",
        "| jobs | machines | policy | makespan s | device busy | CPU busy | simulator s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["simulation"]:
        lines.append(
            f"| {r['jobs']} | {r['machines']} | {r['policy']} | {r['makespan_s']:.1f} | {r['device_busy']:.0%} | "
            f"{r['cpu_busy']:.0%} | {r['simulator_seconds']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def _seconds_and_error(seconds: float | None, error: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} ({error:.1%})"


def plots(results: dict, traces: dict[str, Trace], workdir: Path) -> None:
    """The Gantt charts of every policy's run and the simulator study's figure, as PNGs in `workdir`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (extra `plots`): no PNGs")
        return
    machine = Machine(results["machine"]["cpu_cores"], results["machine"]["devices"])
    fig, axes = plt.subplots(len(traces), 1, figsize=(12, 1.6 * len(traces) + 1), sharex=True, squeeze=False)
    for ax, (policy, trace) in zip(axes[:, 0], traces.items()):
        gantt(trace, [machine], ax=ax, title=f"{policy}: makespan {trace.makespan:.1f} s")
    fig.tight_layout()
    fig.savefig(workdir / "gantt.png", dpi=120)
    plt.close(fig)
    rows = results["simulation"]
    counts = sorted({r["machines"] for r in rows})
    makespan = {(r["jobs"], r["machines"], r["policy"]): r["makespan_s"] for r in rows}
    fig, axes = plt.subplots(2, len(counts), figsize=(3.6 * len(counts), 5.5), sharex=True, squeeze=False)
    styles = ["-", "--", "-.", ":"]
    for column, machines in enumerate(counts):
        for i, policy in enumerate(dict.fromkeys(r["policy"] for r in rows)):
            mine = [r for r in rows if r["machines"] == machines and r["policy"] == policy]
            jobs = [r["jobs"] for r in mine]
            speedup = [makespan[r["jobs"], machines, "sequential"] / r["makespan_s"] for r in mine]
            style = {"marker": "o", "linestyle": styles[i % len(styles)], "label": policy}
            axes[0, column].plot(jobs, speedup, **style)
            axes[1, column].plot(jobs, [r["device_busy"] for r in mine], **style)
        axes[0, column].set(xscale="log", title=f"{machines} machine(s)")
        axes[1, column].set(xscale="log", xlabel="jobs", ylim=(0, 1.05))
    axes[0, 0].set_ylabel("makespan: sequential / policy")
    axes[1, 0].set_ylabel("device busy fraction")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(workdir / "simulation.png", dpi=120)
    plt.close(fig)
