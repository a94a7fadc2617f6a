"""jaxgraph: computation graphs, verified TASO-style substitutions, cost model, search and an RL environment.

ONNX import/export (`load_onnx`, `save_onnx`, `to_onnx`) and the real models (`zoo_path`,
`with_random_weights`) need the `onnx` extra. `jaxgraph.generate` (the rule generator) loads on first use.
"""

import importlib

__version__ = "0.1.0"  # the distribution's version, as in pyproject.toml

from jaxgraph.backends import BACKENDS, ONNXRUNTIME, TASO, XLA, Backend, Kernel, kernel_graph
from jaxgraph.cost import (
    CostModel,
    MeasuredCost,
    OrtCost,
    Roofline,
    affected,
    cost,
    cost_change,
    measure_runtime,
    ort_session,
    spearman,
)
from jaxgraph.env import Env, Observation
from jaxgraph.execute import execute, random_inputs, runner
from jaxgraph.exhaustive import canonical_key, exhaustive_search
from jaxgraph.graph import Delta, Graph, GraphBuilder, Node, Patch, Ref, canonical_form, node_signatures
from jaxgraph.graph_codec import GraphCodec
from jaxgraph.instances import Instances, graph_list, random_instances, trap_instances
from jaxgraph.jax_cost import CostParams, node_costs
from jaxgraph.jax_edits import Edit, apply_edit
from jaxgraph.jax_env import EnvParams, EnvState, JaxEnv
from jaxgraph.jax_graph import GraphState
from jaxgraph.jax_match import MATCHERS, cloned_rules, default_matcher
from jaxgraph.jax_rules import JAX_RULE_FAMILIES, JAX_RULES
from jaxgraph.locations import LocationIndex
from jaxgraph.models import (
    MODELS,
    SMALL_SIZES,
    bert,
    inception_v3,
    mobilenet_v2,
    resnet18,
    resnet50,
    squeezenet1_1,
    taso_attention_stack,
)
from jaxgraph.onnx_io import load_onnx, save_onnx, to_onnx
from jaxgraph.onnx_models import ZOO_MODELS, with_random_weights, zoo_path
from jaxgraph.ops import OP_TYPES, OPS
from jaxgraph.optimize import main as optimize_cli
from jaxgraph.optimize import relative_difference
from jaxgraph.parity import ParityReport, compare_states, fitting_env, replay_parity
from jaxgraph.pattern_data import Pattern, excluded_xfers, load_patterns, parse_pattern
from jaxgraph.patterns import DATA_FAMILY, CompiledPattern, data_rules, hand_covered, taso_rules
from jaxgraph.random_graphs import random_graph, random_taso_graph
from jaxgraph.reference import execute_reference, fold_constants
from jaxgraph.rule_tables import RESTRICTIONS, RuleTable, generated_rule_table, taso_table
from jaxgraph.rules import RULES, Location, Rule, make_rule
from jaxgraph.saturation import (
    declarations,
    equality_saturation,
    pattern_rule,
    run_programs,
    saturate,
    to_graph,
)
from jaxgraph.saturation_extract import extract_greedy, extract_ilp
from jaxgraph.search import SearchResult, greedy, taso_search
from jaxgraph.timestep import StepType, TimeStep, outcome, restart, termination, transition, truncation
from jaxgraph.traps import TrapGraph, is_trap, trap_graph

__all__ = [
    "DATA_FAMILY",
    "cloned_rules",
    "optimize_cli",
    "relative_difference",
    "Backend",
    "CompiledPattern",
    "JAX_RULE_FAMILIES",
    "MATCHERS",
    "RESTRICTIONS",
    "RuleTable",
    "SMALL_SIZES",
    "default_matcher",
    "excluded_xfers",
    "extract_greedy",
    "extract_ilp",
    "generated_rule_table",
    "hand_covered",
    "saturate",
    "taso_table",
    "to_graph",
    "CostModel",
    "CostParams",
    "Delta",
    "Edit",
    "Env",
    "EnvParams",
    "EnvState",
    "Graph",
    "GraphBuilder",
    "GraphCodec",
    "GraphState",
    "Instances",
    "JAX_RULES",
    "JaxEnv",
    "Kernel",
    "Location",
    "LocationIndex",
    "MODELS",
    "MeasuredCost",
    "Node",
    "ONNXRUNTIME",
    "OPS",
    "OP_TYPES",
    "Observation",
    "ParityReport",
    "OrtCost",
    "BACKENDS",
    "Patch",
    "Pattern",
    "RULES",
    "Ref",
    "Roofline",
    "Rule",
    "SearchResult",
    "StepType",
    "TASO",
    "TimeStep",
    "TrapGraph",
    "XLA",
    "ZOO_MODELS",
    "affected",
    "apply_edit",
    "bert",
    "compare_states",
    "canonical_form",
    "canonical_key",
    "cost",
    "cost_change",
    "data_rules",
    "declarations",
    "run_programs",
    "execute",
    "runner",
    "ort_session",
    "equality_saturation",
    "execute_reference",
    "exhaustive_search",
    "fitting_env",
    "fold_constants",
    "generate",
    "graph_list",
    "greedy",
    "inception_v3",
    "is_trap",
    "kernel_graph",
    "load_patterns",
    "parse_pattern",
    "pattern_rule",
    "load_onnx",
    "make_rule",
    "measure_runtime",
    "mobilenet_v2",
    "node_costs",
    "node_signatures",
    "outcome",
    "random_graph",
    "random_instances",
    "random_inputs",
    "random_taso_graph",
    "replay_parity",
    "restart",
    "resnet18",
    "resnet50",
    "save_onnx",
    "spearman",
    "squeezenet1_1",
    "taso_attention_stack",
    "taso_rules",
    "taso_search",
    "termination",
    "to_onnx",
    "transition",
    "trap_graph",
    "trap_instances",
    "truncation",
    "with_random_weights",
    "zoo_path",
]


def __getattr__(name: str):
    """`TASO_RULES` (the full table, see `jaxgraph.patterns`) is loaded on first use: the load checks every
    data rule numerically. So is the `generate` subpackage (rule generation, see `jaxgraph.generate`)."""
    if name == "TASO_RULES":
        return taso_rules()
    if name == "generate":
        return importlib.import_module("jaxgraph.generate")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
