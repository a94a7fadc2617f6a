"""The agents' study as tables and plots: `results_table(results) -> markdown`, `plot_results(results, out)`
(thesis Fig. 5.3, 5.5, 5.7 analogs), and `judge_targets(results)`, the study's targets each with its numbers and
met or missed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxgraph.rules import RULES

METHOD_NAMES = {"greedy": "greedy", "taso": "TASO", "model_free": "model-free", "model_based": "model-based"}


def judge_targets(results: dict) -> list[tuple[str, bool, str]]:
    """(target, met, numbers) for each target of the study (model-free vs TASO, an agent beating TASO on BERT, the
    held-out graph, dream throughput) that the results can judge."""
    rows = results["models"]
    out = []
    gaps = {name: r["methods"]["model_free"]["cost"] / r["methods"]["taso"]["cost"] - 1.0 for name, r in rows.items()}
    worst = max(gaps, key=gaps.get)
    out.append(("model-free within 5% of TASO's final cost on every model", all(g <= 0.05 for g in gaps.values()),
                f"worst {worst}: {100 * gaps[worst]:+.2f}%"))
    bert = next((r for name, r in rows.items() if name == "bert"), None)
    if bert is not None:
        taso = bert["methods"]["taso"]["cost"]
        best = min(("model_free", "model_based"), key=lambda m: bert["methods"][m]["cost"])
        change = bert["methods"][best]["cost"] / taso - 1.0
        numbers = f"best agent {METHOD_NAMES[best]} {100 * change:+.2f}% vs TASO"
        optimum = bert.get("reachable_optimum")
        if optimum is not None and optimum["exhausted"]:
            numbers += (f"; every graph the rules reach was searched ({optimum['explored']}): the optimum is "
                        f"{100 * (optimum['cost'] / taso - 1.0):+.2f}% vs TASO")
        out.append(("an agent better than TASO on BERT", change < -1e-9, numbers))  # equal up to rounding: no
    multi = results["held_out"]
    out.append((f"held-out graph ({multi['graph']}): multi-graph agent at least matches greedy",
                multi["agent_cost"] <= multi["greedy_cost"] * (1 + 1e-9),
                f"agent {multi['agent_cost']:.4f} vs greedy {multi['greedy_cost']:.4f} "
                f"(initial {multi['initial_cost']:.4f})"))
    for r in rows.values():
        if "step_time" in r:
            s = r["step_time"]
            floor = 1e5 if s["device"] == "cpu" else 1e6
            out.append((f"dream rollouts >= {floor:,.0f} steps/s vmapped ({s['device']})",
                        s["dream_steps_per_s"] >= floor, f"{s['dream_steps_per_s']:,.0f} steps/s"))
    return out


def _tau_rows(sweep: dict) -> list[str]:
    lines = ["| tau | world-model score (%) | real score, final state (%) | gap (points) | returned graph (%) |",
             "|---|---|---|---|---|"]
    for tau, dream, real, returned in zip(sweep["taus"], sweep["dream_pct"], sweep["real_pct"],
                                          sweep["returned_pct"]):
        dream, real, returned = np.asarray(dream), np.asarray(real), np.asarray(returned)
        lines.append(f"| {tau:g} | {dream.mean():+.2f} +- {dream.std():.2f} | {real.mean():+.2f} +- {real.std():.2f} "
                     f"| {real.mean() - dream.mean():+.2f} | {returned.mean():+.2f} +- {returned.std():.2f} |")
    return lines


def results_table(results: dict) -> str:
    """The study as markdown: per-model costs, latencies and interactions, the tau table, step times,
    the held-out graph and the targets."""
    rows = results["models"]
    lines = [f"# graphopt_rl results\n\nmachine: {results['machine']}\n",
             "## Final cost (runtime-aware analytic cost, ms) and reduction, per method\n",
             "| model | ops | initial | " + " | ".join(METHOD_NAMES.values()) + " |", "|---|---|---|" + "---|" * 4]
    for name, r in rows.items():
        cells = [f"{r['methods'][m]['cost']:.4f} ({100 * r['methods'][m]['reduction']:.2f}%)" for m in METHOD_NAMES]
        lines.append(f"| {name} | {r['ops']} | {r['initial_cost']:.4f} | " + " | ".join(cells) + " |")
    timed = {name: r for name, r in rows.items() if "latency_ms" in r}
    for backend in ("onnxruntime", "jax") if timed else ():
        lines += [f"\n## Measured end-to-end latency, {backend} (median ms)\n",
                  "| model | original | " + " | ".join(METHOD_NAMES.values()) + " |", "|---|---|" + "---|" * 4]
        for name, r in timed.items():
            ms = r["latency_ms"][backend]
            cells = " | ".join(f"{ms[m]:.3f}" for m in METHOD_NAMES)
            lines.append(f"| {name} | {ms['original']:.3f} | {cells} |")
    lines += ["\n## Agents: returned graph (cheapest state visited) vs the final state of the most-likely-action "
              "episode, and the reachable optimum (unpruned search)\n",
              "| model | model-free returned | model-free final state | model-based returned | model-based final state "
              "| reachable optimum |", "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        cells = [f"{r['methods'][m][k]:.4f}" for m in ("model_free", "model_based") for k in ("cost", "final_cost")]
        optimum = r.get("reachable_optimum")
        cells.append("-" if optimum is None else f"{optimum['cost']:.4f} ({optimum['explored']} graphs"
                     f"{', all' if optimum['exhausted'] else ', budget hit'})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["\n## Real-environment interactions (greedy: steps; TASO: graphs expanded; agents: Env steps of "
              "training and evaluation)\n",
              "| model | " + " | ".join(METHOD_NAMES.values()) + " | model-based dream return |", "|---|" + "---|" * 5]
    for name, r in rows.items():
        lines.append(f"| {name} | " + " | ".join(str(r["methods"][m]["interactions"]) for m in METHOD_NAMES)
                     + f" | {r['methods']['model_based']['dream_return']:.4f} |")
    for name, r in rows.items():
        if "tau_sweep" in r:
            seeds = len(r["tau_sweep"]["dream_pct"][0])
            lines += [f"\n## Table 5.1 analog on {name}: cost change in the dream vs in the real Env, {seeds} seeds\n"]
            lines += _tau_rows(r["tau_sweep"])
        if "step_time" in r:
            s = r["step_time"]
            lines += [f"\n## Step time ({name})\n", "| real Env step (ms) | dream step, batch of "
                      f"{s['dream_batch']} (ms) | dream steps/s |", "|---|---|---|",
                      f"| {s['real_step_ms']:.2f} | {s['dream_step_ms']:.3f} | {s['dream_steps_per_s']:,.0f} |"]
    multi = results["held_out"]
    lines += [f"\n## Held-out graph\n\nagent trained on {', '.join(multi['trained_on'])} ({multi['interactions']} "
              f"Env steps with evaluation), evaluated on {multi['graph']}: returned graph {multi['agent_cost']:.4f} "
              f"(final state of its most-likely-action episode {multi['agent_final_cost']:.4f}), greedy "
              f"{multi['greedy_cost']:.4f}, initial {multi['initial_cost']:.4f}\n", "## Targets\n"]
    lines += [f"- {'met' if met else 'MISSED'}: {what} ({numbers})" for what, met, numbers in judge_targets(results)]
    lines += [f"- note: {note}" for note in results.get("notes", [])]
    return "\n".join(lines) + "\n"


def plot_results(results: dict, out: Path) -> list[Path]:
    """rewards.png (normalised reward curves: model-free per epoch, dreams per update), world_model.png
    (latent log-likelihood per epoch), transformations.png (rules applied per model and method); the
    files written (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'jax-research-systems[plots]'): skipping the plots")
        return []
    rows, files = results["models"], []

    def save(fig, name):
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(out / name)

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for name, r in rows.items():
        curve = np.asarray([np.nan if v is None else v for v in r["model_free_curve"]], float)
        axes[0].plot(np.arange(1, len(curve) + 1), 100 * curve, label=name)
        axes[1].plot(np.arange(1, len(r["dream_curve"]) + 1), 100 * np.asarray(r["dream_curve"]), label=name)
    axes[0].set(xlabel="epoch", ylabel="episode return (% of initial cost saved)", title="model-free, real Env")
    axes[1].set(xlabel="update", ylabel="dream return (% of initial cost)", title="model-based, in the world model")
    axes[0].legend(fontsize=7)
    save(fig, "rewards.png")

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, r in rows.items():
        ax.plot(np.arange(1, len(r["world_model_loglik"]) + 1), r["world_model_loglik"], label=name)
    ax.set(xlabel="epoch", ylabel="latent log-likelihood per dimension", title="MDN-RNN fit (random-agent data)")
    ax.legend(fontsize=7)
    save(fig, "world_model.png")

    names = [rule.name for rule in RULES]
    labels, counts = [], []
    for name, r in rows.items():
        for method in ("taso", "model_free", "model_based"):
            labels.append(f"{name} / {METHOD_NAMES[method]}")
            counts.append([r["methods"][method]["rules"].count(rule) for rule in names])
    counts = np.asarray(counts)
    used = counts.sum(axis=0) > 0
    if not used.any():
        used[:] = True
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * used.sum() + 4), 0.3 * len(labels) + 2))
    image = ax.imshow(counts[:, used], cmap="viridis", aspect="auto")
    ax.set_xticks(range(used.sum()), [n for n, u in zip(names, used) if u], rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_title("transformations applied")
    fig.colorbar(image, ax=ax, label="times applied")
    save(fig, "transformations.png")
    return files
