"""Import time of each package (`import jaxsched`, `jaxquant`, `jaxgraph`): this tree against another checkout.

    python -m benchmarks.import_time                              # this tree only
    python -m benchmarks.import_time --against /path/to/checkout  # and an older checkout, side by side

Each import runs in a fresh interpreter (`python -c "import X"`, JAX on the CPU) whose working directory is the
checkout, so that checkout's packages are the ones imported; the two checkouts alternate, `--repeats` times each,
and the table gives the median wall seconds of the interpreter's whole run, the median of a bare `python -c pass`
(the interpreter's own start) subtracted, with how many modules the import loaded and whether numba is among them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

PACKAGES = ("jaxsched", "jaxquant", "jaxgraph")
PROBE = ("import json, sys; {imports}; "
         "print(json.dumps([len(sys.modules), 'numba' in sys.modules, 'orbax.checkpoint' in sys.modules]))")


def run(root: Path, package: str | None) -> tuple[float, list]:
    """Wall seconds of one fresh interpreter importing `package` from `root` (None: nothing), and what it loaded."""
    code = PROBE.format(imports=f"import {package}" if package else "pass")
    begin = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    return time.perf_counter() - begin, json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Time every package's import in each checkout, alternating, and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="another checkout to time side by side (its root folder)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.exit(2, f"{parser.prog}: error: --repeats must be at least 1, got {args.repeats}\n")
    roots = {"this tree": Path(__file__).resolve().parent.parent}
    if args.against is not None:
        if not (args.against / "jaxsched" / "__init__.py").is_file():
            parser.exit(2, f"{parser.prog}: error: {args.against} holds no jaxsched package\n")
        roots["against"] = args.against.resolve()
    times = {(name, package): [] for name in roots for package in (None, *PACKAGES)}
    loaded = {}
    for _ in range(args.repeats):
        for package in (None, *PACKAGES):
            for name, root in roots.items():
                seconds, loaded[name, package] = run(root, package)
                times[name, package].append(seconds)
    print("| package | checkout | import (s) | modules loaded | numba | orbax |")
    print("|---|---|---|---|---|---|")
    for package in PACKAGES:
        for name in roots:
            base = np.median(times[name, None])
            count, numba, orbax = loaded[name, package]
            print(f"| {package} | {name} | {np.median(times[name, package]) - base:.2f} | {count} | "
                  f"{'yes' if numba else 'no'} | {'yes' if orbax else 'no'} |")
    if "against" in roots:
        for package in PACKAGES:
            new, old = (np.median(times[name, package]) - np.median(times[name, None]) for name in roots)
            print(f"{package}: {old - new:.2f} s less to import" + (f" ({old / new:.2f}x faster)" if new > 0.05 else
                                                                     " (next to nothing left to import)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
