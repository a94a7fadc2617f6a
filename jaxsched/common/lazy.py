"""Package faces whose names load on first use (PEP 562), so that importing a package, or any module under it,
loads only what is used: `import jaxquant` needs `jaxsched.common.arguments`, not the numba kernels that
`jaxsched`'s face also names.

A face declares its names once, grouped by the module that defines them, and `lazy_face` turns the package into
one that imports a module the first time one of its names is read (`jaxsched.heft`, `from jaxsched import heft`)
and keeps the value. A name that is also a submodule (`jaxsched.heft` the function, `jaxsched/heft.py` the
module) stays the function: importing the submodule does not replace it, as it would on a plain package. Any
other submodule is still reachable as an attribute (`jaxsched.deepsched`), imported on first use. A plain module
can be a face too (`jaxsched.jax`, `jaxsched.numba`: the tiers, each a module holding only its `lazy_face`).
"""

from __future__ import annotations

import importlib
import sys
import types


class LazyFace(types.ModuleType):
    """A package (or face module) whose public names (`_lazy_names`: name -> (module, attribute)) are imported on
    first use."""

    def __getattr__(self, name: str):
        where = self.__dict__.get("_lazy_names", {})
        if name in where:
            module, attribute = where[name]
            value = getattr(importlib.import_module(module), attribute)
            self.__dict__[name] = value
            return value
        if name.startswith("__"):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        try:
            return importlib.import_module(f"{self.__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{self.__name__}.{name}":
                raise
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def __setattr__(self, name: str, value) -> None:
        # The import system binds a freshly loaded submodule on its package; a public name of the same spelling
        # (the function `heft` of `heft.py`) keeps its meaning.
        if (isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}"
                and name in self.__dict__.get("_lazy_names", {})):
            return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_names", {})))


def lazy_face(package: str, exports: dict[str, tuple[str, ...]]) -> list[str]:
    """Make `package` (its `__name__`) a `LazyFace` over `exports`: module -> the names it gives the face, each
    `"name"` or `"public=name"` for a name the face spells otherwise. Returns the sorted public names, the
    package's `__all__`. A ValueError if two modules give the face one name."""
    where: dict[str, tuple[str, str]] = {}
    for module, names in exports.items():
        for entry in names:
            public, _, attribute = entry.partition("=")
            if public in where:
                raise ValueError(f"{package}: {public!r} is given by both {where[public][0]} and {module}")
            where[public] = (module, attribute or public)
    face = sys.modules[package]
    face.__dict__["_lazy_names"] = where
    face.__class__ = LazyFace
    return sorted(where)
