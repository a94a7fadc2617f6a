"""The agents' study as tables and plots: `results_table(results) -> markdown` (one part per setting, never mixed),
`plot_results(results, out)` (thesis Fig. 5.3, 5.5, 5.7 analogs and the sample-efficiency curves), and
`judge_targets(section)` / `judge_research(section)`, each setting's targets with their numbers and met or
missed. In the research setting a lower cost is a cost reduction of TASO's cost model, never a speedup."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.graphopt_rl.settings import SETTINGS
from jaxgraph import RULES
from jaxgraph.rl import curve_table, plot_curves, steps_to_reach

METHOD_NAMES = {"greedy": "greedy", "taso": "TASO", "model_free": "model-free", "model_based": "model-based"}
RESEARCH_NAMES = {"greedy": "greedy", "taso_1": "TASO a=1.0", "taso_1.05": "TASO a=1.05",
                  "eqsat_greedy": "eq. sat., greedy extr.", "eqsat_ilp": "eq. sat., ILP extr.",
                  "exhaustive": "exhaustive optimum", "model_free": "model-free", "model_based": "model-based"}
AGENT_NAMES = {"model_free": "model-free", "model_based": "model-based"}


def judge_targets(results: dict) -> list[tuple[str, bool, str]]:
    """(target, met, numbers) for each target of the deployment setting (model-free vs TASO, an agent beating TASO
    on BERT, the held-out graph, dream throughput) that its section of the results (`models`, `held_out`) can
    judge."""
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


def tau_lines(rows: dict) -> list[str]:
    """The Table 5.1 analog of each model row that holds a tau sweep: per tau the cost change predicted in the
    dream, the real final state's, their gap and the returned graph's, mean +- std over the seeds."""
    lines = []
    for name, r in rows.items():
        if "tau_sweep" in r:
            seeds = len(r["tau_sweep"]["dream_pct"][0])
            lines += [f"\n## Table 5.1 analog on {name}: cost change in the dream vs in the real Env, {seeds} seeds\n"]
            lines += _tau_rows(r["tau_sweep"])
    return lines


def _tau_rows(sweep: dict) -> list[str]:
    lines = ["| tau | world-model score (%) | real score, final state (%) | gap (points) | returned graph (%) |",
             "|---|---|---|---|---|"]
    for tau, dream, real, returned in zip(sweep["taus"], sweep["dream_pct"], sweep["real_pct"],
                                          sweep["returned_pct"]):
        dream, real, returned = np.asarray(dream), np.asarray(real), np.asarray(returned)
        lines.append(f"| {tau:g} | {dream.mean():+.2f} +- {dream.std():.2f} | {real.mean():+.2f} +- {real.std():.2f} "
                     f"| {real.mean() - dream.mean():+.2f} | {returned.mean():+.2f} +- {returned.std():.2f} |")
    return lines


def judge_research(section: dict) -> list[tuple[str, bool, str]]:
    """(target, met, numbers) for the research setting's targets: the best agent at most TASO's search (alpha
    1.05) on every builder and strictly below on 2; equality saturation (the cheaper extraction, the faster one
    where both find the same cost) within 1% of the best of any method in at most 1/10 of TASO's time on 3; the
    model-based agent reaching the model-free agent's final best with 5x fewer real steps on 3 (each with the
    models that fail it and why)."""
    rows = {n: r for n, r in section["models"].items() if not n.startswith("imported:")}
    out = []
    gaps = {n: min(r["methods"][a]["cost"] for a in AGENT_NAMES) / r["methods"]["taso_1.05"]["cost"] - 1.0
            for n, r in rows.items()}
    below = [n for n, g in gaps.items() if g < -1e-9]
    out.append(("best agent at most TASO a=1.05 on every builder, strictly below on >= 2",
                all(g <= 1e-9 for g in gaps.values()) and len(below) >= 2,
                ", ".join(f"{n} {100 * g:+.2f}%" for n, g in gaps.items())))
    good, why = [], []
    for n, r in rows.items():
        found = [m["cost"] for m in r["methods"].values() if m["cost"] is not None]
        eq = min(("eqsat_greedy", "eqsat_ilp"), key=lambda m: (r["methods"][m]["cost"], r["methods"][m]["seconds"]))
        gap = r["methods"][eq]["cost"] / min(found) - 1.0
        ratio = r["methods"][eq]["seconds"] / max(r["methods"]["taso_1.05"]["seconds"], 1e-9)
        (good if gap <= 0.01 and ratio <= 0.1 else why).append(
            f"{n}: {RESEARCH_NAMES[eq]} {100 * gap:+.2f}% vs best, {ratio:.2g}x TASO's time")
    out.append(("equality saturation within 1% of the best in <= 1/10 of TASO's time on >= 3 models",
                len(good) >= 3, "; ".join(good + [f"not met {w}" for w in why])))
    counts = []
    for n, r in rows.items():
        target = r["curves"]["model_free"][-1][1]
        mf, mb = (steps_to_reach(r["curves"][a], target) for a in AGENT_NAMES)
        counts.append((n, mf, mb, mb is not None and mb * 5 <= mf))
    out.append(("model-based reaches model-free's final best with >= 5x fewer real steps on >= 3 models",
                sum(c[3] for c in counts) >= 3,
                ", ".join(f"{n}: model-free {mf} steps, model-based {'never' if mb is None else mb}"
                          for n, mf, mb, _ in counts)))
    return out


def research_table(section: dict) -> list[str]:
    """The research setting as markdown lines: costs and cost reductions, budgets and times, the targets."""
    rows = section["models"]
    research = SETTINGS["research"]
    lines = [f"## Research setting: TASO's cost (Roofline, backend {research.backend}); every method uses "
             f"{research.rule_table}; a lower cost is a {research.gain}, not a speedup\n",
             "| model | ops | initial | " + " | ".join(RESEARCH_NAMES.values()) + " |",
             "|---|---|---|" + "---|" * len(RESEARCH_NAMES)]
    for name, r in rows.items():
        cells = ["not known (cap hit)" if r["methods"][m]["cost"] is None else
                 f"{r['methods'][m]['cost']:.4f} ({100 * r['methods'][m]['reduction']:.2f}%)" for m in RESEARCH_NAMES]
        lines.append(f"| {name} | {r['ops']} | {r['initial_cost']:.4f} | " + " | ".join(cells) + " |")
    lines += ["\nBudgets and times (TASO: graphs expanded of its budget; equality saturation: e-nodes; exhaustive: "
              "distinct graphs, or the cap it hit; agents: real Env steps with evaluation)\n",
              "| model | " + " | ".join(RESEARCH_NAMES.values()) + " |", "|---|" + "---|" * len(RESEARCH_NAMES)]
    for name, r in rows.items():
        cells = []
        for m in RESEARCH_NAMES:
            numbers = r["methods"][m]
            if m == "exhaustive" and numbers["cost"] is None:
                cells.append(f"> {numbers['cap']} graphs")
            elif m.startswith("taso"):
                cells.append(f"{numbers['interactions']}/{numbers['budget']}, {numbers['seconds']:.2f} s")
            elif "seconds" in numbers:
                cells.append(f"{numbers['interactions']}, {numbers['seconds']:.2f} s")
            else:
                cells.append(str(numbers["interactions"]))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += jitted_lines(section) + tau_lines(rows) + ["\n### Targets (research)\n"]
    lines += [f"- {'met' if met else 'MISSED'}: {what} ({numbers})" for what, met, numbers in judge_research(section)]
    return lines


def jitted_lines(section: dict) -> list[str]:
    """The jitted multi-graph agent's rows (`experiments.graphopt_rl.jitted_agent`), where the study ran it."""
    jitted = section.get("jitted_multi_graph")
    if jitted is None:
        return []
    lines = [f"\nOne model-free agent trained in the jitted environment on every model at once ({jitted['env_steps']} "
             f"real steps, {jitted['train_seconds']:.0f} s with compilation), against TASO 1.05\n",
             "| model | jitted multi-graph agent | TASO 1.05 | evaluation steps |", "|---|---|---|---|"]
    for name, r in jitted["graphs"].items():
        taso = section["models"][name]["methods"]["taso_1.05"]["reduction"] if name in section["models"] else None
        lines.append(f"| {name} | {100 * (1 - r['agent_cost'] / r['initial_cost']):.2f}% | "
                     f"{'-' if taso is None else f'{100 * taso:.2f}%'} | {r['evaluation_steps']} |")
    return lines + [f"\nSkipped (another output count): {', '.join(jitted['skipped'])}"] * bool(jitted["skipped"])


def efficiency_lines(name: str, section: dict) -> list[str]:
    """The sample-efficiency table of one setting's agents."""
    rows = section["models"]
    curves = {n: {AGENT_NAMES[a]: r["curves"][a] for a in AGENT_NAMES} for n, r in rows.items()}
    return ([f"\n## Sample efficiency ({name} setting): best cost found (cost reduction) after so many "
             "real-environment steps\n"] + curve_table(curves, {n: r["initial_cost"] for n, r in rows.items()}))


def results_table(results: dict) -> str:
    """The study as markdown, one part per setting (research, deployment), then the notes."""
    lines = [f"# graphopt_rl results\n\nmachine: {results['machine']}\n"]
    for name, section in results["settings"].items():
        lines += research_table(section) if name == "research" else deployment_table(section)
        lines += efficiency_lines(name, section) + [""]
    lines += [f"- note: {note}" for note in results.get("notes", [])]
    return "\n".join(lines) + "\n"


def deployment_table(results: dict) -> list[str]:
    """The deployment setting as markdown lines: per-model costs, latencies and interactions, the tau table, step
    times, the held-out graph and the targets."""
    rows = results["models"]
    lines = ["## Deployment setting: final cost (runtime-aware analytic cost, ms) and reduction, per method\n",
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
    lines += tau_lines(rows)
    for name, r in rows.items():
        if "step_time" in r:
            s = r["step_time"]
            lines += [f"\n## Step time ({name})\n", "| real Env step (ms) | dream step, batch of "
                      f"{s['dream_batch']} (ms) | dream steps/s |", "|---|---|---|",
                      f"| {s['real_step_ms']:.2f} | {s['dream_step_ms']:.3f} | {s['dream_steps_per_s']:,.0f} |"]
    multi = results["held_out"]
    lines += [f"\n## Held-out graph\n\nagent trained on {', '.join(multi['trained_on'])} ({multi['interactions']} "
              f"Env steps with evaluation), evaluated on {multi['graph']}: returned graph {multi['agent_cost']:.4f} "
              f"(final state of its most-likely-action episode {multi['agent_final_cost']:.4f}), greedy "
              f"{multi['greedy_cost']:.4f}, initial {multi['initial_cost']:.4f}\n", "### Targets (deployment)\n"]
    lines += [f"- {'met' if met else 'MISSED'}: {what} ({numbers})" for what, met, numbers in judge_targets(results)]
    return lines


def plot_results(results: dict, out: Path) -> list[Path]:
    """sample_efficiency_<setting>.png (best cost against real steps, per setting), and from the deployment
    setting rewards.png (normalised reward curves: model-free per epoch, dreams per update), world_model.png
    (latent log-likelihood per epoch), transformations.png (rules applied per model and method); the files
    written (none without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install 'jax-research-systems[plots]'): skipping the plots")
        return []
    files = []
    for name, section in results["settings"].items():
        rows = section["models"]
        plot_curves({n: {AGENT_NAMES[a]: r["curves"][a] for a in AGENT_NAMES} for n, r in rows.items()},
                    {n: r["initial_cost"] for n, r in rows.items()},
                    f"{name} setting: best cost found against real-environment steps",
                    out / f"sample_efficiency_{name}.png")
        files.append(out / f"sample_efficiency_{name}.png")
    if "deployment" not in results["settings"]:
        return files
    rows = results["settings"]["deployment"]["models"]

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
