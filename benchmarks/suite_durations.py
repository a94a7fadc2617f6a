"""Per-file test durations, to see where the CI suite's time goes (and compare two versions of the tests).

    python -m benchmarks.suite_durations                             # by default the slowest jaxgraph test files
    python -m benchmarks.suite_durations tests                       # the whole CI selection (about 12 min)
    python -m benchmarks.suite_durations --from-junit before.xml     # sum a run already made

Runs `pytest -m "not slow and not gpu"` on the given paths (with `JAX_PLATFORMS=cpu`) and prints a markdown
table: per test file the seconds of setup, call and teardown of all its tests, and the count of tests.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

CHANGED = ("tests/jaxgraph/test_jax_env.py", "tests/jaxgraph/rl", "tests/jaxgraph/test_cost.py")


def per_file(junit: str | Path) -> dict[str, tuple[float, int]]:
    """{test file: (seconds, tests)} from a pytest junit XML report (a test's time covers setup to teardown)."""
    seconds, counts = collections.Counter(), collections.Counter()
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "").replace(".", "/") + ".py"
        seconds[name] += float(case.get("time", 0.0))
        counts[name] += 1
    return {name: (seconds[name], counts[name]) for name in sorted(seconds, key=seconds.get, reverse=True)}


def run(paths: list[str], junit: Path) -> int:
    """pytest on `paths` as CI selects tests; the report goes to `junit`. Returns pytest's exit status."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "pytest", *paths, "-m", "not slow and not gpu", "-q", "-p", "no:cacheprovider",
               f"--junitxml={junit}"]
    return subprocess.run(command, env=env, stdout=subprocess.DEVNULL).returncode


def table(durations: dict[str, tuple[float, int]]) -> str:
    rows = [f"| {name} | {seconds:.1f} | {count} |" for name, (seconds, count) in durations.items()]
    total = sum(seconds for seconds, _ in durations.values())
    count = sum(count for _, count in durations.values())
    return "\n".join(["| test file | seconds | tests |", "|---|---|---|", *rows, f"| total | {total:.1f} | {count} |"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=list(CHANGED), help="test files or folders")
    parser.add_argument("--from-junit", help="sum this junit XML report instead of running pytest")
    args = parser.parse_args(argv)
    if args.from_junit:
        if not Path(args.from_junit).is_file():
            print(f"error: no junit report at {args.from_junit}", file=sys.stderr)
            return 2
        print(table(per_file(args.from_junit)))
        return 0
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"error: no test path {missing[0]}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        junit = Path(scratch) / "report.xml"
        status = run(args.paths, junit)
        print(table(per_file(junit)))
    return status


if __name__ == "__main__":
    sys.exit(main())
