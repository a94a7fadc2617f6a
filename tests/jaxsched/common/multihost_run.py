"""One program over several processes: the jaxquant sweep, the dream sweep and DeepSched training, each on a
mesh of every process's devices. `test_sharding.py` starts it once alone and once as 2 processes (one CPU device
each, gloo collectives, a localhost coordinator) and compares what process 0 saves:
`JAX_COORDINATOR_ADDRESS=localhost:PORT JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=i python -m
tests.jaxsched.common.multihost_run OUT.npz WORKDIR` (without the variables: one process)."""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxsched.common import initialize_distributed  # noqa: E402

if __name__ == "__main__":
    out, workdir = sys.argv[1:3]
    if "JAX_COORDINATOR_ADDRESS" in os.environ:
        initialize_distributed(timeout_s=60)
    from tests.jaxsched.common import workloads

    results = {"quant": workloads.quant_sweep(), "dream": workloads.dream_sweep()(),
               "deepsched": workloads.deepsched_training(workdir)}
    leaves = {f"{name}_{i}": np.asarray(leaf) for name, tree in results.items()
              for i, leaf in enumerate(jax.tree.leaves(tree))}
    if jax.process_index() == 0:
        np.savez(out, **leaves)
    print(f"process {jax.process_index()} of {jax.process_count()}: {len(leaves)} arrays", flush=True)
