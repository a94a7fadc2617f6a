"""benchmarks/ and experiments/ import the libraries through their package faces (`from jaxgraph import X`,
`from jaxgraph.rl import Y`, `from jaxsched.common import Z`: a package's `__init__`; or a tier face such as
`from jaxsched.numba import heft`: a module whose `__all__` is a `lazy_face`), never a module inside one
(`from jaxgraph.cost import X`). The imports are read from the source (`ast`), so nothing is imported to check.

The modules that still import deeper are listed with how many such imports each holds: a file not listed must
have none, and a listed file no more than its count, so the list only shrinks."""

import ast
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = ("jaxsched", "jaxquant", "jaxgraph")
FOLDERS = ("benchmarks", "experiments")

# Deep imports still held (file: count): none in benchmarks/ or experiments/.
KNOWN: dict[str, int] = {}


def imported_modules(path: Path) -> list[str]:
    """Every absolute module an `import` or `from ... import` statement of `path` names, functions included."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


def is_face(module: str) -> bool:
    """Whether `module` is a package of the libraries (its `__init__.py` is a face) or a module that is only a
    face (its names declared by `lazy_face`, as the tiers `jaxsched.jax` and `jaxsched.numba`)."""
    if ROOT.joinpath(*module.split("."), "__init__.py").is_file():
        return True
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    return path.is_file() and "__all__ = lazy_face(__name__," in path.read_text()


def deep_imports() -> Counter:
    """file (relative to the root): number of library modules it imports that are not package faces."""
    counts = Counter()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for module in imported_modules(path):
                if module.split(".")[0] in LIBRARIES and not is_face(module):
                    counts[path.relative_to(ROOT).as_posix()] += 1
    return counts


def test_the_reader_finds_deep_imports_and_faces(tmp_path):
    """Hand-written source: three deep imports (one inside a function), four through faces (one a tier face), one
    relative import."""
    source = tmp_path / "example.py"
    source.write_text("import jaxgraph\nfrom jaxgraph.rl import make_train\nfrom jaxsched.common import Workdir\n"
                      "from jaxgraph.cost import Roofline\nfrom . import sibling\nfrom jaxsched.numba import heft\n"
                      "from jaxsched.numba_heft import heft_numba\n"
                      "def f():\n    import jaxquant.train\n")
    modules = imported_modules(source)
    assert modules == ["jaxgraph", "jaxgraph.rl", "jaxsched.common", "jaxgraph.cost", "jaxsched.numba",
                       "jaxsched.numba_heft", "jaxquant.train"]
    assert [m for m in modules if not is_face(m)] == ["jaxgraph.cost", "jaxsched.numba_heft", "jaxquant.train"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_benchmarks_and_experiments_import_through_faces(folder):
    counts = {f: n for f, n in deep_imports().items() if f.startswith(folder + "/")}
    grown = {f: (n, KNOWN.get(f, 0)) for f, n in counts.items() if n > KNOWN.get(f, 0)}
    assert not grown, f"deep imports (file: found, allowed); import through the package face instead: {grown}"
