"""Convert TASO's xfer table (the text dump of `graph_subst.pb` in TASO's xfer order) into the pattern file
`jaxgraph/data/taso_rules.json`, once: the library only reads the JSON.

    python -m benchmarks.taso_table TABLE.txt [--out jaxgraph/data/taso_rules.json]

TASO's op and attribute names become the IR's: MATMUL/CONV2D/EW_ADD/EW_MUL/CONCAT/SPLIT/RELU -> matmul,
conv2d, add, mul, concat, split, relu; PM_ACTI 0/2 -> activation none/relu; PM_PAD 0/1 -> padding SAME/VALID;
PM_KERNEL_H/W -> kernel; PM_STRIDE_H/W -> stride; PM_AXIS -> axis; PM_NUMDIM -> rank; PM_NUM_OUTPUTS -> parts
(PM_NUM_INPUTS is the concat's input count). Tensors stay TASO's (op, output) pairs, negative ops naming the
pattern's external inputs. Rules the IR cannot express are listed under `excluded` with the reason.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

_OPS = {"MATMUL": "matmul", "CONV2D": "conv2d", "EW_ADD": "add", "EW_MUL": "mul", "CONCAT": "concat",
        "SPLIT": "split", "RELU": "relu"}
_ACTIVATIONS = {0: "none", 2: "relu"}
_PADDINGS = {0: "SAME", 1: "VALID"}
_LINE = re.compile(r"xfer\s+(\d+): PB rule\s+(\d+): SRC\[ (.*) \]  ->  DST\[ (.*) \]  "
                   r"mapped\(srcOp,dstOp,srcTs,dstTs\)=(\[.*\])\s*$")
_OP = re.compile(r"(\w+)\[(.*?)\](\{.*?\})?$")
DISCONNECTED = ("its source ops fall in two parts that share no tensor, so it matches every pair of such parts "
                "in the graph: no radius bounds a match, which the incremental location index needs (TASO "
                "enumerates all pairs)")

GROUPED = ("its target is a two-group conv over concatenated inputs and weights, equal to the source only when "
           "both source convs have as many output channels, which no pattern constraint states")
_GROUPED = (117, 118, 148, 149)


def _attrs(op: str, params: dict[str, int]) -> dict:
    if op == "matmul":
        return {"activation": _ACTIVATIONS[params["PM_ACTI"]]}
    if op == "conv2d":
        return {"kernel": [params["PM_KERNEL_H"], params["PM_KERNEL_W"]],
                "stride": [params["PM_STRIDE_H"], params["PM_STRIDE_W"]],
                "padding": _PADDINGS[params["PM_PAD"]], "activation": _ACTIVATIONS[params["PM_ACTI"]]}
    if op == "concat":
        return {"axis": params["PM_AXIS"], "rank": params["PM_NUMDIM"]}
    if op == "split":
        return {"axis": params["PM_AXIS"], "parts": params["PM_NUM_OUTPUTS"]}
    return {}


def _ops(text: str) -> list[dict]:
    ops = []
    for part in text.split(" ; "):
        match = _OP.match(part.strip())
        if match is None:
            raise ValueError(f"cannot parse pattern op {part!r}")
        name, inputs, params = match.groups()
        op = _OPS[name]
        ops.append({"op": op, "inputs": [list(t) for t in ast.literal_eval(f"[{inputs}]")],
                    "attrs": _attrs(op, ast.literal_eval(params) if params else {})})
    return ops


def _connected(ops: list[dict]) -> bool:
    """Whether the source ops form one piece when ops sharing a tensor or reading each other are joined."""
    part = list(range(len(ops)))

    def find(k: int) -> int:
        while part[k] != k:
            k = part[k]
        return k

    readers: dict[int, int] = {}
    for k, op in enumerate(ops):
        for node, _ in op["inputs"]:
            other = node if node >= 0 else readers.setdefault(node, k)
            part[find(k)] = find(other)
    return len({find(k) for k in range(len(ops))}) == 1


def convert(lines: list[str]) -> dict:
    """The JSON document: one entry per generated rule, `excluded` for those the IR cannot express."""
    rules, excluded = [], []
    for line in lines:
        match = _LINE.match(line.strip())
        if match is None:
            continue
        xfer, pb_rule, src, dst, mapped = match.groups()
        src_ops, dst_ops = _ops(src), _ops(dst)
        entry = {"xfer": int(xfer), "pb_rule": int(pb_rule), "src": src_ops, "dst": dst_ops,
                 "mapped": [[[s, ts], [d, td]] for s, d, ts, td in ast.literal_eval(mapped)]}
        if not _connected(src_ops):
            excluded.append({"xfer": int(xfer), "reason": DISCONNECTED})
            continue
        if int(xfer) in _GROUPED:
            excluded.append({"xfer": int(xfer), "reason": GROUPED})
            continue
        rules.append(entry)
    return {"source": "TASO graph_subst.pb, xfers 18-150 in TASO's order (xfer = pb rule + 18)",
            "rules": rules, "excluded": excluded}


def main(argv: list[str] | None = None) -> int:
    """Write the pattern file from TASO's table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", type=Path)
    parser.add_argument("--out", type=Path, default=Path("jaxgraph/data/taso_rules.json"))
    args = parser.parse_args(argv)
    if not args.table.is_file():
        print(f"error: {args.table} is not a file", file=sys.stderr)
        return 2
    document = convert(args.table.read_text().splitlines())
    lines = ",\n".join(json.dumps(r, separators=(",", ":")) for r in document["rules"])
    skipped = ",\n".join(json.dumps(r) for r in document["excluded"])
    args.out.write_text(f'{{"source": {json.dumps(document["source"])},\n"rules": [\n{lines}\n],\n'
                        f'"excluded": [\n{skipped}\n]}}\n')
    print(f"{len(document['rules'])} rules, {len(document['excluded'])} excluded -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
