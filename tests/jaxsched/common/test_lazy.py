"""Package faces load on first use (`jaxsched.common.lazy`): importing jaxquant or jaxgraph loads no numba and no
jaxsched tier; a face's names are the functions even after their same-named modules are imported; the tier faces
`jaxsched.jax` and `jaxsched.numba` give the twins under their references' names and shadow neither package."""

import json
import os
import subprocess
import sys
import types

import pytest

from jaxsched.common.lazy import lazy_face

TIERS = ("jaxsched.numba_", "jaxsched.jax_", "jaxsched.batch", "jaxsched.heft", "jaxsched.ga", "jaxsched.listsched",
         "jaxsched.deepsched", "jaxsched.autotune")  # prefixes: every numba_X and jax_X twin


@pytest.mark.parametrize("package", ["jaxquant", "jaxgraph", "jaxsched", "jaxsched.common", "jaxsched.jax",
                                     "jaxsched.numba"])
def test_importing_a_package_loads_no_numba_and_no_jaxsched_tier(package):
    code = (f"import json, sys; import {package}; "
            "print(json.dumps(sorted(m for m in sys.modules if m == 'numba' or m.startswith('jaxsched.'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = [m for m in json.loads(done.stdout.strip().splitlines()[-1]) if m != package]
    assert "numba" not in loaded
    assert not [m for m in loaded if m.startswith(TIERS)], loaded
    assert all(m.startswith("jaxsched.common") for m in loaded), loaded


def test_face_names_load_on_use_and_keep_their_meaning():
    import jaxsched
    import jaxsched.heft  # the module of the same name as the function: the face keeps the function

    assert isinstance(jaxsched.heft, types.FunctionType) and jaxsched.heft.__module__ == "jaxsched.heft"
    assert jaxsched.SCHEDULER_NAMES[0] == "HEFT"  # a name the face spells otherwise (listsched.NAMES)
    assert isinstance(jaxsched.deepsched, types.ModuleType)  # a submodule outside the face, imported on use
    assert "upward_rank" in dir(jaxsched) and "upward_rank" in jaxsched.__all__
    assert "heft_numba" not in dir(jaxsched) and "jax" not in jaxsched.__all__  # tiers live in sub-namespaces
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        jaxsched.no_such_name  # noqa: B018


def test_a_name_given_twice_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "lazy_probe", types.ModuleType("lazy_probe"))
    with pytest.raises(ValueError, match="'x' is given by both a and b"):
        lazy_face("lazy_probe", {"a": ("x",), "b": ("y", "x")})


def test_tier_faces_give_the_twins_and_shadow_neither_package():
    """`jaxsched.jax` and `jaxsched.numba` are modules of the package whose names are the real packages': the
    package's own modules import `jax` and `numba` by absolute name, so they get the real ones even after the
    tier faces are imported first (checked in a fresh interpreter, where import order is known)."""
    code = (
        "import sys; import jaxsched, jaxsched.jax, jaxsched.numba\n"
        "import jaxsched.numba_heft, jaxsched.jax_listsched\n"
        "import jax, numba\n"
        "assert jax is sys.modules['jax'] and jax.__name__ == 'jax' and hasattr(jax, 'jit'), jax\n"
        "assert numba is sys.modules['numba'] and hasattr(numba, 'njit'), numba\n"
        "assert jaxsched.numba_heft.numba is numba and jaxsched.jax_listsched.jax is jax\n"
        "assert jaxsched.numba.heft is jaxsched.numba_heft.heft_numba\n"
        "assert jaxsched.numba.heft_batch is jaxsched.numba_heft.heft_batch_numba\n"
        "assert jaxsched.jax.heft is jaxsched.jax_listsched.heft_padded\n"
        "assert jaxsched.jax.simulate_batch.__module__ == 'jaxsched.jax_simulate'\n"
        "assert jaxsched.heft.__module__ == 'jaxsched.heft'\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
