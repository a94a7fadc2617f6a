"""The batch-sharding helper on the suite's 2 host devices, its errors, and (in subprocesses) every batched entry
point on 1 to 4 devices and as 2 processes against the one-device, one-process run."""

import os
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxsched.common import batch_mesh, constrain_batch, gather, initialize_distributed, replicate, shard_batch
from tests.jaxsched.common.workloads import TERNARY_RTOL

ROOT = Path(__file__).resolve().parents[3]


def test_a_batch_that_does_not_divide_is_padded_split_and_cut_back():
    mesh = batch_mesh()
    assert mesh.devices.size == 2 and mesh.axis_names == ("batch",)
    batch = {"x": np.arange(6.0).reshape(3, 2), "key": jax.random.split(jax.random.key(0), 3)}
    placed, size = shard_batch(batch, mesh)
    assert size == 3
    chex.assert_shape(placed["x"], (4, 2))
    np.testing.assert_array_equal(placed["x"], [[0, 1], [2, 3], [4, 5], [4, 5]])  # the last row repeated
    assert [shard.data.shape for shard in placed["x"].addressable_shards] == [(2, 2), (2, 2)]
    assert {shard.device for shard in placed["x"].addressable_shards} == set(jax.devices())
    np.testing.assert_array_equal(gather(placed, size)["x"], batch["x"])
    np.testing.assert_array_equal(jax.random.key_data(gather(placed, size)["key"]), jax.random.key_data(batch["key"]))


def test_a_jitted_program_follows_the_placement_and_compiles_once_per_shape():
    mesh = batch_mesh()
    weights = replicate(jnp.arange(4.0), mesh)
    row_dot = jax.jit(chex.assert_max_traces(lambda rows, w: rows @ w, n=1))
    one_device = jax.jit(lambda rows, w: rows @ w)
    for count in (3, 4, 3):  # 3 pads to 4: the same shape every time
        rows = np.random.default_rng(count).normal(size=(count, 4)).astype(np.float32)
        placed, size = shard_batch(rows, mesh)
        out = row_dot(placed, weights)
        assert out.sharding.spec == jax.sharding.PartitionSpec("batch")
        np.testing.assert_array_equal(gather(out, size), one_device(rows, np.arange(4.0, dtype=np.float32)))


def test_a_batch_built_inside_a_program_is_pinned_across_the_mesh():
    mesh = batch_mesh()
    build = jax.jit(lambda x: constrain_batch({"rows": jnp.tile(x, (4, 1)), "ids": jnp.arange(4)}, mesh))
    out = build(jnp.ones(3))
    assert [leaf.sharding.spec for leaf in jax.tree.leaves(out)] == [jax.sharding.PartitionSpec("batch")] * 2
    np.testing.assert_array_equal(out["ids"], np.arange(4))


def test_bad_meshes_and_batches_are_refused():
    cpu = jax.devices()[0]
    with pytest.raises(ValueError, match=r"one platform, got \['cpu', 'gpu'\]"):
        batch_mesh([cpu, SimpleNamespace(platform="gpu", id=7)])
    with pytest.raises(ValueError, match="asked for 3 devices, 2 are available"):
        batch_mesh(3)
    with pytest.raises(ValueError, match="at least one device"):
        batch_mesh([])
    with pytest.raises(ValueError, match="batch of 1 cannot be split across 2 devices without padding"):
        shard_batch(np.zeros((1, 3)), batch_mesh(), pad=False)
    with pytest.raises(ValueError, match="does not divide across 2 devices"):
        shard_batch(np.zeros(3), batch_mesh(), pad=False)
    with pytest.raises(ValueError, match="same leading axis"):
        shard_batch((np.zeros(3), np.zeros(4)), batch_mesh())


def test_a_multi_process_start_needs_its_coordinates(monkeypatch):
    for name in ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="coordinator address, a process count and a process id"):
        initialize_distributed()
    with pytest.raises(ValueError, match=r"process id 2 is not in \[0, 2\)"):
        initialize_distributed("localhost:1", 2, 2)
    monkeypatch.setenv("JAX_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES must be an integer"):
        initialize_distributed("localhost:1", process_id=0)


def _run(args, env=None, timeout=600):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(process, timeout=600):
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    assert process.returncode == 0, output[-4000:]
    return output


def test_ga_on_1_2_4_devices_equals_one_device():
    """About 30 s on 2 loaded cores (4 fake CPU devices in a subprocess)."""
    print(_finish(_run(["tests.jaxsched.common.device_counts", "ga"])))


def test_list_schedulers_and_their_adversarial_search_on_1_to_4_devices_equal_one_device():
    """Batched list schedules on 3 fake CPU devices and annealing chains on 3 and 4 (a subprocess) equal the
    one-device run, the batch padded where the device count does not divide it."""
    print(_finish(_run(["tests.jaxsched.common.device_counts", "list_schedulers", "adversarial_search"])))


@pytest.mark.slow
def test_every_entry_point_on_1_to_4_devices_equals_one_device():
    """About 10 min on 2 loaded cores: HEFT labels, jaxquant and dream sweeps, DeepSched training, PPO."""
    print(_finish(_run(["tests.jaxsched.common.device_counts", "labels", "quant_sweep", "dream_sweep",
                        "deepsched_training", "ppo"]), timeout=1800))


@pytest.mark.slow
def test_two_processes_give_the_one_process_result(tmp_path):
    """About 3 min on 2 loaded cores: the sweeps and DeepSched training as one program over 2 processes
    (gloo collectives, a localhost coordinator), against the same script run alone."""
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        port = probe.getsockname()[1]
    module = "tests.jaxsched.common.multihost_run"
    alone = _run([module, str(tmp_path / "one.npz"), str(tmp_path / "one")])
    pair = [_run([module, str(tmp_path / "two.npz"), str(tmp_path / "two")],
                 {"JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": str(i)})
            for i in range(2)]
    assert "process 0 of 1" in _finish(alone)
    assert [f"process {i} of 2" in _finish(p) for i, p in enumerate(pair)] == [True, True]
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert len(one.files) == len(two.files) > 0
    for name in one.files:  # the device_counts tolerances
        rtol = TERNARY_RTOL if name.startswith("quant") else 1e-5
        np.testing.assert_allclose(two[name], one[name], rtol=rtol, atol=1e-6, err_msg=name)
