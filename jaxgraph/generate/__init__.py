"""Generate substitution rules as TASO does: enumerate small graphs, fingerprint them in batched, jitted JAX calls
(one per op kind), prove equal pairs exactly, prune redundant rules, drop the ones true only at square shapes and
write them in the pattern-file format.

`generate(Config(...), "rules.json")` or `python -m jaxgraph.generate --ops ... --max-ops 3 --out rules.json`;
the file loads with `jaxgraph.pattern_data.load_patterns` and runs through `pattern_rules` like TASO's table.
"""

from jaxgraph.generate.enumerate import EXTRA_WORLDS, GENERATE_OPS, TASO_OPS, OpKind, World, op_kinds
from jaxgraph.generate.known import known_answers
from jaxgraph.generate.pipeline import STAGES, Config, WorldResult, generate, run_world
from jaxgraph.generate.verify import PRIME, relu_axioms_hold
from jaxgraph.generate.write import describe

__all__ = ["EXTRA_WORLDS", "GENERATE_OPS", "PRIME", "STAGES", "TASO_OPS", "Config", "OpKind", "World", "WorldResult",
           "describe", "generate", "known_answers", "op_kinds", "relu_axioms_hold", "run_world"]
