"""Strict JAX settings for the whole test suite (set before jax is imported anywhere), and one compilation
cache for the session: many tests build the same program from fresh closures (a trainer per test, an environment
per parametrisation), and XLA then compiles it once instead of once per test."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402

jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")

if "TESTS_COMPILATION_CACHE" not in os.environ:  # pytest-xdist's workers inherit the controller's folder
    os.environ["TESTS_COMPILATION_CACHE"] = tempfile.mkdtemp(prefix="jax-compilation-cache-")
    atexit.register(shutil.rmtree, os.environ["TESTS_COMPILATION_CACHE"], ignore_errors=True)
jax.config.update("jax_compilation_cache_dir", os.environ["TESTS_COMPILATION_CACHE"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
