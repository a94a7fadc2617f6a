"""The study's two settings, named and never mixed.

`research`: TASO's cost (`Roofline(backend=TASO)`: every operator a kernel of its own, as in TASO, Tensat and
X-RLflow) with TASO's full rule table (`TASO_RULES`); there a lower cost is a *cost reduction* of a model, never a
speedup. `deployment`: onnxruntime's runtime-aware cost (`Roofline(backend=ONNXRUNTIME)`: a rewrite onnxruntime
does by itself saves nothing) with the hand-written `RULES`, and measured latencies of the resulting graphs; what
`jaxgraph.optimize` optimizes for. Within a setting every method (greedy, the searches, both agents) runs the
setting's one rule table. The agents train and are evaluated on the host `Env`; where `GraphoptConfig.jitted_agent`
is set, one more model-free agent trains in the jitted `JaxEnv` (which matches the data rules too) on every research
model at once (`experiments.graphopt_rl.jitted_agent`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from jaxgraph import BACKENDS, RULES, Roofline, Rule


@dataclass(frozen=True)
class Setting:
    """A named cost model and rule table; `gain` names what a lower cost means in this setting."""

    name: str
    backend: str  # a `jaxgraph.backends.BACKENDS` name
    rule_table: str  # "RULES" or "TASO_RULES"
    gain: str
    measured: bool  # the resulting graphs' latencies are measured (deployment only)

    def cost_model(self) -> Roofline:
        """The setting's analytic cost model."""
        return Roofline(backend=BACKENDS[self.backend])

    def rules(self) -> Sequence[Rule]:
        """The rule table of every method in this setting (searches and agents alike)."""
        if self.rule_table == "RULES":
            return RULES
        from jaxgraph import TASO_RULES

        return TASO_RULES


SETTINGS = {
    "research": Setting("research", "taso", "TASO_RULES", "cost reduction", False),
    "deployment": Setting("deployment", "onnxruntime", "RULES", "cost reduction (latencies measured)", True),
}


def setting(name: str) -> Setting:
    """The setting called `name`; ValueError naming the known ones otherwise."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}: expected one of {sorted(SETTINGS)}")
    return SETTINGS[name]
