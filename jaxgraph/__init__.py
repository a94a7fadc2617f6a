"""jaxgraph: computation graphs, verified TASO-style substitutions, cost model, search and an RL environment.

ONNX import/export (`load_onnx`, `save_onnx`, `to_onnx`) needs the `onnx` extra.
"""

from jaxgraph.cost import CostModel, MeasuredCost, Roofline, cost, cost_change, measure_runtime, spearman
from jaxgraph.env import Env, Observation
from jaxgraph.execute import execute, random_inputs
from jaxgraph.graph import Delta, Graph, GraphBuilder, Node, Patch, Ref
from jaxgraph.locations import LocationIndex
from jaxgraph.models import (
    MODELS,
    bert,
    inception_v3,
    mobilenet_v2,
    resnet18,
    resnet50,
    squeezenet1_1,
    taso_attention_stack,
)
from jaxgraph.onnx_io import load_onnx, save_onnx, to_onnx
from jaxgraph.ops import OP_TYPES, OPS
from jaxgraph.reference import execute_reference, fold_constants
from jaxgraph.rules import RULES, Location, Rule
from jaxgraph.search import SearchResult, greedy, taso_search

__all__ = [
    "CostModel", "Delta", "Env", "Graph", "GraphBuilder", "Location", "LocationIndex", "MODELS", "MeasuredCost",
    "Node", "OPS", "OP_TYPES", "Observation", "Patch", "RULES", "Ref", "Roofline", "Rule", "SearchResult", "bert",
    "cost", "cost_change", "execute", "execute_reference", "fold_constants", "greedy", "inception_v3",
    "load_onnx", "measure_runtime", "mobilenet_v2", "random_inputs", "resnet18", "resnet50", "save_onnx", "spearman",
    "squeezenet1_1", "taso_attention_stack", "taso_search", "to_onnx",
]
