"""ONNX -> IR: `load_onnx` walks an ONNX graph in order, folds constant nodes with `onnx.reference`, converts
the rest with the per-op converters of `_import_ops`, and carries an op the IR lacks as an opaque node (with
output shapes from ONNX shape inference, or from its JAX implementation)."""

from __future__ import annotations

import math
import os
from typing import Any, Mapping, Sequence

import numpy as np

from jaxgraph._recognize import recognize_patterns
from jaxgraph.graph import Graph, GraphBuilder, Ref
from jaxgraph.onnx_io._import_ops import CONTRIB_IMPORTERS, IMPORTERS
from jaxgraph.onnx_io.spec import CONTRIB, DEFAULT_DOMAINS, OPSET, onnx_module, op_label, schema


class Importer:
    """Walks an ONNX graph in order. A node whose inputs are all constant (or a Shape of a tensor, whose
    shape is static) is folded at once with `onnx.reference`; the rest become IR ops where the IR has the
    op, and opaque nodes otherwise (rejected in strict mode). The converters of `_import_ops` read its
    state: `b` (the graph being built), `constants` (folded values by name), `consumed` (names some node or
    graph output reads), `opset` (the default domain's version) and `slices` (shared splits of Gather)."""

    def __init__(self, model, input_shapes: Mapping[str, Sequence[int]], strict: bool) -> None:
        onnx = onnx_module()
        from onnx import numpy_helper

        self.graph = model.graph
        self.opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}
        self.opset = self.opsets.get("", OPSET)
        self.strict = strict
        self.b = GraphBuilder()
        self.tensors: dict[str, Ref] = {}
        self.constants: dict[str, np.ndarray] = {n.name: numpy_helper.to_array(n) for n in self.graph.initializer}
        self.consumed = {name for n in self.graph.node for name in n.input} | {o.name for o in self.graph.output}
        self._materialized: dict[str, Ref] = {}
        self.slices: dict[tuple[str, int], tuple[Ref, ...]] = {}  # shared splits of Gather
        self._onnx = onnx
        for value in self.graph.input:
            if value.name in self.constants:
                continue
            dims = value.type.tensor_type.shape.dim
            shape = tuple(input_shapes.get(value.name, [d.dim_value if d.HasField("dim_value") else 0 for d in dims]))
            if not shape or min(shape) < 1:
                raise ValueError(f"input {value.name!r} has symbolic or unknown dimensions {shape}; "
                                 f"pass input_shapes={{{value.name!r}: (...)}}")
            if value.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
                raise ValueError(f"input {value.name!r} is not float32")
            self.tensors[value.name] = self.b.input(value.name, shape)

    def tensor(self, name: str) -> Ref:
        """The IR tensor named `name`; a float constant becomes a weight on first use."""
        if name in self.tensors:
            return self.tensors[name]
        if name in self.constants:
            if name not in self._materialized:
                value = self.constants[name]
                if not np.issubdtype(value.dtype, np.floating):
                    raise ValueError(f"constant {name!r} ({value.dtype}) is used as a float32 tensor")
                self._materialized[name] = self.b.weight(name, value.astype(np.float32))
            return self._materialized[name]
        raise ValueError(f"tensor {name!r} is used before it is produced")

    def constant(self, name: str, what: str) -> np.ndarray:
        """The constant value of `name`; ValueError naming `what` if it is computed at run time."""
        if name not in self.constants:
            raise ValueError(f"{what} must be a constant (initializer or Constant), got computed tensor {name!r}")
        return self.constants[name]

    def shape(self, name: str) -> tuple[int, ...]:
        """The static shape of tensor or constant `name`."""
        return self.constants[name].shape if name in self.constants else self.b.shape(self.tensor(name))

    def run(self) -> Graph:
        """Convert every node in order; the built graph with LayerNorm and GELU patterns recognized."""
        for node in self.graph.node:
            attrs = {a.name: self._onnx.helper.get_attribute_value(a) for a in node.attribute}
            attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
            try:
                outputs = self.convert(node, attrs)
            except ValueError as error:
                raise ValueError(f"ONNX node {node.name or node.output[0]!r} ({op_label(node)}): {error}") from None
            for name, value in zip(node.output, outputs):
                if value is None:
                    continue
                if isinstance(value, np.ndarray):
                    self.constants[name] = value
                else:
                    self.tensors[name] = value
        graph = self.b.build({o.name: self.tensor(o.name) for o in self.graph.output})
        return recognize_patterns(graph)

    def convert(self, node, attrs: dict[str, Any]) -> list:
        """The node's outputs: NumPy arrays (folded constants), IR tensors, or None (unused outputs)."""
        domain = "" if node.domain in DEFAULT_DOMAINS else node.domain
        present = [name for name in node.input if name]
        if domain == "" and node.op_type in ("Shape", "Size") and present[0] in self.tensors:
            return [self._static_shape(node, attrs)]
        if domain == "" and all(name in self.constants for name in present):
            return self._fold(node)
        table = IMPORTERS if domain == "" else CONTRIB_IMPORTERS if domain == CONTRIB else {}
        if node.op_type in table:
            outputs = table[node.op_type](self, node, attrs)
            if outputs is not None:
                return outputs
        if self.strict:
            raise ValueError(f"strict mode: {op_label(node)} with these attributes and inputs has no native IR op")
        return self._opaque(node, domain)

    def _static_shape(self, node, attrs) -> np.ndarray:
        shape = self.b.shape(self.tensors[node.input[0]])
        if node.op_type == "Size":
            return np.asarray(math.prod(shape), np.int64)
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return np.asarray(shape[start:end], np.int64)

    def _fold(self, node) -> list[np.ndarray]:
        """Evaluate a node on constants with onnx.reference (the ONNX specification's own implementation)."""
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(n) for n in node.input if n],
                                  [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        opsets = [helper.make_opsetid(domain, version) for domain, version in {**self.opsets, "": self.opset}.items()]
        try:
            evaluator = ReferenceEvaluator(helper.make_model(graph, opset_imports=opsets))
            values = evaluator.run(None, {name: self.constants[name] for name in node.input if name})
        except Exception as error:  # onnx.reference raises its own exception types
            raise ValueError(f"constant folding failed: {error}") from None
        return [np.asarray(v) for v in values]

    def _opaque(self, node, domain: str) -> list[Ref | None]:
        """Carry the node verbatim (upgraded to the export opset), with output shapes from ONNX shape inference."""
        onnx = self._onnx
        from onnx import numpy_helper

        node, version, moved = _upgrade(node, domain, self.opsets, self.constants)
        self.constants.update(moved)
        outputs = list(node.output)
        while outputs and (not outputs[-1] or outputs[-1] not in self.consumed):
            outputs.pop()
        if not outputs or "" in outputs:
            raise ValueError("an opaque node needs its used outputs to come first")
        slots, refs, types, data = [], [], {}, {}
        for name in node.input:
            if not name:
                slots.append(None)
                continue
            value = self.constants.get(name)
            if value is not None and not np.issubdtype(value.dtype, np.floating):
                tensor = numpy_helper.from_array(value, name)
                slots.append(tensor.SerializeToString())
                data[name] = tensor
                types[name] = onnx.helper.make_tensor_type_proto(tensor.data_type, value.shape)
                continue
            slots.append(len(refs))
            refs.append(self.tensor(name))
            types[name] = onnx.helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, self.b.shape(refs[-1]))
        attrs = dict(op_type=node.op_type, domain=domain, opset=version,
                     attributes=tuple(a.SerializeToString() for a in node.attribute), slots=tuple(slots),
                     input_shapes=tuple(self.b.shape(r) for r in refs))
        shapes = _infer_output_shapes(node, domain, version, types, data, outputs)
        if shapes is None:
            shapes = _jax_output_shapes(attrs, refs, self.b, len(outputs))
        return list(self.b.add_outputs("opaque", refs, node.name, **attrs, shapes=tuple(shapes)))


def _upgrade(node, domain: str, opsets: Mapping[str, int], constants: Mapping[str, np.ndarray]):
    """The node in the export opset's form (onnx.version_converter on a one-node model), its domain version,
    and its constant inputs after the conversion (renamed apart from the model's tensors).

    Opaque nodes are written back into an opset-`OPSET` file, so one from an older opset must mean there
    what it meant in the source (Pad, Clip, Squeeze, Slice and the reductions moved attributes to inputs).
    A node from a newer opset keeps it, and the file is written at that opset (see `to_onnx`)."""
    source = opsets.get(domain, 1)
    if domain != "":
        return node, source, {}
    old, new = schema(node.op_type, source, ""), schema(node.op_type, OPSET, "")
    if source >= OPSET or old is None or new is None or old.since_version == new.since_version:
        return node, max(source, OPSET) if new is not None else source, {}
    from onnx import helper, numpy_helper, version_converter

    given = [numpy_helper.from_array(np.asarray(constants[n]), n) for n in node.input if n in constants]
    values = [helper.make_empty_tensor_value_info(n) for n in node.input if n and n not in constants]
    outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
    model = helper.make_model(helper.make_graph([node], "upgrade", values, outs, given),
                              opset_imports=[helper.make_opsetid("", source)])
    try:
        converted = version_converter.convert_version(model, OPSET).graph
    except Exception as error:  # the converter raises RuntimeError and friends
        raise ValueError(f"cannot carry {node.op_type} from opset {source} to {OPSET}: {error}") from None
    main = [n for n in converted.node if n.op_type != "Constant"]
    if len(main) != 1:
        raise ValueError(f"cannot carry {node.op_type} from opset {source} to {OPSET} as one node")
    moved = {n.output[0]: numpy_helper.to_array(a.t) for n in converted.node if n.op_type == "Constant"
             for a in n.attribute if a.name == "value"}
    moved.update((i.name, numpy_helper.to_array(i)) for i in converted.initializer)
    upgraded = main[0]
    renamed = {name: f"{node.output[0]}.opset{OPSET}.{name}" for name in moved}
    upgraded.input[:] = [renamed.get(name, name) for name in upgraded.input]
    return upgraded, OPSET, {renamed[name]: value for name, value in moved.items()}


def _infer_output_shapes(node, domain: str, version: int, types: dict, data: dict, outputs: list[str]):
    """Static float32 output shapes from ONNX shape inference; None if it has no schema or no answer."""
    onnx = onnx_module()
    op_schema = schema(node.op_type, version, domain)
    if op_schema is None:
        return None
    try:
        inferred = onnx.shape_inference.infer_node_outputs(
            op_schema, node, types, data, opset_imports=[onnx.helper.make_opsetid(domain, version)])
    except Exception:  # inference errors come as InferenceError, ValidationError or RuntimeError
        return None
    shapes = []
    for name in outputs:
        if name not in inferred or not inferred[name].tensor_type.HasField("shape"):
            return None
        tensor_type = inferred[name].tensor_type
        if tensor_type.elem_type != onnx.TensorProto.FLOAT:
            raise ValueError(f"output {name!r} is {onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)}, "
                             "but the IR computes in float32")
        dims = tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            return None
        shapes.append(tuple(int(d.dim_value) for d in dims))
    return shapes


def _jax_output_shapes(attrs, refs, builder: GraphBuilder, count: int):
    """Output shapes from the JAX implementation (jax.eval_shape); ValueError if the op is unsupported."""
    import jax

    from jaxgraph._opaque import KERNELS, jax_kernel, label

    if attrs["domain"] != "" or attrs["op_type"] not in KERNELS:
        raise ValueError(f"unsupported ONNX op {label(attrs)}: no ONNX shape inference answer and no JAX "
                         "implementation")
    frozen = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    specs = [jax.ShapeDtypeStruct(builder.shape(r), np.float32) for r in refs]
    out = jax.eval_shape(lambda *xs: jax_kernel(frozen, *xs), *specs)
    return [tuple(o.shape) for o in out[:count]]



def load_onnx(model: str | os.PathLike | Any, input_shapes: Mapping[str, Sequence[int]] | None = None, *,
              strict: bool = False) -> Graph:
    """Read an ONNX model (path or `ModelProto`) into a `Graph`.

    `input_shapes` fixes symbolic input dimensions (e.g. a dynamic batch). Constant subgraphs (including
    shape computations on static shapes) are folded; decomposed LayerNorm and GELU become the IR's ops;
    ops the IR lacks are carried as opaque nodes, or rejected with `strict=True`. Raises `ValueError`
    naming the node (and the op with its domain) that cannot be imported.
    """
    onnx = onnx_module()
    source = "the given ModelProto"
    if isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
        if not os.path.isfile(source):
            raise FileNotFoundError(f"no ONNX model at {source}")
        with open(source, "rb") as file:
            data = file.read()
        if not data:
            raise ValueError(f"{source} is empty, not an ONNX model")
        try:
            model = onnx.load_from_string(data)
        except Exception as error:  # protobuf's DecodeError and friends: the bytes are not a ModelProto
            raise ValueError(f"{source} is not an ONNX model (or is damaged): {error}") from None
    _check_model_header(model, source)
    return Importer(model, input_shapes or {}, strict).run()


def batch_one(model: str | os.PathLike | Any) -> dict[str, tuple[int, ...]]:
    """The input shapes of an ONNX model (path or `ModelProto`) whose shape has a symbolic dimension (a dynamic
    batch), with every symbolic dimension fixed to 1: the `input_shapes` that `load_onnx` needs for it."""
    if isinstance(model, (str, os.PathLike)):
        if not os.path.isfile(model):
            raise FileNotFoundError(f"no ONNX model at {os.fspath(model)}")
        model = onnx_module().load(os.fspath(model), load_external_data=False)
    shapes = {}
    for value in model.graph.input:
        dims = value.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            shapes[value.name] = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
    return shapes


def _check_model_header(model, source: str) -> None:
    """Raise ValueError unless `model` names its default-domain opset and has a graph with outputs.

    A truncated file can still parse as a ModelProto that lost its trailing fields (protobuf writes
    `opset_import` last); guessing the opset would silently change op semantics (Softmax's axis)."""
    if not any(o.domain in ("", "ai.onnx") for o in model.opset_import):
        raise ValueError(f"{source} declares no ai.onnx opset (a truncated or damaged file?)")
    if not model.HasField("graph") or not model.graph.output:
        raise ValueError(f"{source} has no graph outputs (a truncated or damaged file?)")


