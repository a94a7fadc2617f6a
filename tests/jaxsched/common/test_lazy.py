"""Package faces load on first use (`jaxsched.common.lazy`): importing jaxquant or jaxgraph loads no numba and no
jaxsched tier; a face's names are the functions even after their same-named modules are imported."""

import json
import os
import subprocess
import sys
import types

import pytest

from jaxsched.common.lazy import lazy_face

TIERS = ("jaxsched.numba_", "jaxsched.jax_", "jaxsched.batch", "jaxsched.heft", "jaxsched.ga", "jaxsched.listsched",
         "jaxsched.deepsched", "jaxsched.autotune")  # prefixes: every numba_X and jax_X twin


@pytest.mark.parametrize("package", ["jaxquant", "jaxgraph", "jaxsched", "jaxsched.common"])
def test_importing_a_package_loads_no_numba_and_no_jaxsched_tier(package):
    code = (f"import json, sys; import {package}; "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'numba' or m.startswith('jaxsched.'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert "numba" not in loaded
    assert not [m for m in loaded if m.startswith(TIERS)], loaded
    assert all(m.startswith("jaxsched.common") for m in loaded), loaded


def test_face_names_load_on_use_and_keep_their_meaning():
    import jaxsched
    import jaxsched.heft  # the module of the same name as the function: the face keeps the function

    assert isinstance(jaxsched.heft, types.FunctionType) and jaxsched.heft.__module__ == "jaxsched.heft"
    assert jaxsched.SCHEDULER_NAMES[0] == "HEFT"  # a name the face spells otherwise (listsched.NAMES)
    assert isinstance(jaxsched.deepsched, types.ModuleType)  # a submodule outside the face, imported on use
    assert "heft_numba" in dir(jaxsched) and "heft_numba" in jaxsched.__all__
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        jaxsched.no_such_name  # noqa: B018


def test_a_name_given_twice_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "lazy_probe", types.ModuleType("lazy_probe"))
    with pytest.raises(ValueError, match="'x' is given by both a and b"):
        lazy_face("lazy_probe", {"a": ("x",), "b": ("y", "x")})
