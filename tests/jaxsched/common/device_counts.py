"""Every batched entry point on 1, 2 and 4 devices (3 for the list schedulers, 3 and 4 for their search: a count that
pads the batch and one that divides it; 2, 3 and 4 for the HEFT labels) gives the one-device result,
and a second call of the same shape compiles nothing. Run as a script under 4 fake CPU devices (`test_sharding.py`
starts it): `python -m tests.jaxsched.common.device_counts [name ...]`; prints one line per entry point checked.

The GA and HEFT labels (simulations whose results are times and processor ids) must come out bit-equal. Training
programs are compared with a stated tolerance even where members never interact (the jaxquant and dream
sweeps): XLA:CPU compiles the per-device program for the smaller per-device batch, and a float32 program
compiled for another batch size may round differently (one ulp, measured: a vmapped dream training of 6 members
against the same 6 trained one at a time differs by up to 1.2e-7 on one device). DeepSched's data-parallel
training also sums its gradients across devices, in another order; so do PPO's means over the environments (see
`ppo` for its tolerance). Ternary training amplifies such a rounding difference (`workloads.TERNARY_RTOL`)."""

import os
import sys
import tempfile

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax  # noqa: E402
import numpy as np  # noqa: E402

import jaxsched  # noqa: E402
from jaxsched.deepsched.data import label, padded_shape  # noqa: E402
from tests.jaxsched.common import workloads  # noqa: E402
from tests.jaxsched.common.workloads import TERNARY_RTOL  # noqa: E402

COUNTS = (2, 3, 4)


def compiles(run) -> int:
    """How many XLA compilations `run()` triggers."""
    events = []
    listener = lambda event, *_, **__: events.append(event)  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        run()
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    return sum(event == "/jax/core/compile/backend_compile_duration" for event in events)


def same(name, run, rtol=0.0, counts=COUNTS, atol=1e-6):
    """`run(devices)` on 1 device, then on every count of `counts` (twice on the last, which must not compile)."""
    single = run(1)
    for count in counts:
        leaves = jax.tree.leaves(run(count))
        for a, b in zip(jax.tree.leaves(single), leaves, strict=True):
            message = f"{name} x{count}"
            if rtol:
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=message)
            else:
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=message)
    again = compiles(lambda: run(counts[-1]))
    assert again == 0, f"{name}: a second call of the same shape compiled {again} programs"
    print(f"ok {name}: 1 == {' == '.join(map(str, counts))} devices, no recompilation", flush=True)


def ga():
    problem = jaxsched.random_dag(20, 3, seed=1)

    def run(n):
        schedule = jaxsched.ga(problem, population=10, generations=3, backend="jax", devices=n)
        return schedule.proc, schedule.start, schedule.finish

    same("ga", run, counts=(2, 4))  # 10 chromosomes: 12 on 4 devices


def list_schedulers():
    """A static preset with gap insertion (HEFT) and a dynamic one (MinMin): 7 problems, 9 on 3 devices (a batch
    that divides is `adversarial_search`'s on 4)."""
    problems = [jaxsched.random_dag(12 + i, 3, integer=True, seed=i) for i in range(7)]
    for name in ("HEFT", "MinMin"):
        same(f"schedule_batch {name}", lambda n, name=name: jaxsched.jax.schedule_batch(problems, name, devices=n),
             counts=(3,))


def adversarial_search():
    """A static and a dynamic scheduler (as `list_schedulers`), two restarts per ordered pair: 4 chains, 6 on 3
    devices, 4 on 4."""
    config = jaxsched.SearchConfig(steps=20, chains_per_pair=2, names=("HEFT", "MinMin"))
    same("adversarial search", lambda n: jaxsched.search(jax.random.key(0), config, devices=n), counts=(3, 4))


def labels():
    problems = [jaxsched.random_dag(8 + i, 3, seed=i) for i in range(5)]
    same("heft labels", lambda n: label(problems, padded_shape(problems), chunk=5, progress=False, devices=n))


def quant_sweep():
    same("jaxquant sweep", workloads.quant_sweep, rtol=TERNARY_RTOL, counts=(2, 4))  # 3 members: 4 with padding


def dream_sweep():
    sweeps = {n: workloads.dream_sweep(n) for n in (1, 2, 4)}
    same("dream sweep", lambda n: sweeps[n](), rtol=1e-5, counts=(2, 4))  # 6 members: 8 on 4 devices


def deepsched_training():
    def run(n):
        with tempfile.TemporaryDirectory() as directory:
            return workloads.deepsched_training(directory, n)

    same("deepsched training", run, rtol=1e-5, counts=(2, 4))  # minibatches of 6: 8 on 4 devices


def ppo():
    """4 environments (a count each device count divides: 1, 2, 4). Parameters and returns are compared, with
    atol = Adam steps x learning rate: Adam moves a parameter whose gradient is near zero by about the learning
    rate in the direction of the gradient's sign, so a rounding difference in a near-zero gradient can move it by
    that much per step (measured: a value-head bias 9.4e-4 apart after 16 steps of lr 1e-3)."""
    trainers = {n: workloads.ppo_train(n) for n in (1, 2, 4)}
    agent = workloads.PPO_AGENT
    steps = agent.epochs * agent.ppo.update_epochs * agent.ppo.minibatches

    def run(n):
        result = trainers[n]()
        return result.params, result.mean_return, result.episodes

    same("ppo", run, rtol=1e-3, atol=steps * agent.ppo.learning_rate, counts=(2, 4))


CHECKS = {"ppo": ppo, "ga": ga, "labels": labels, "quant_sweep": quant_sweep, "dream_sweep": dream_sweep,
          "deepsched_training": deepsched_training, "list_schedulers": list_schedulers,
          "adversarial_search": adversarial_search}

if __name__ == "__main__":
    assert len(jax.devices()) == 4, jax.devices()
    for check in sys.argv[1:] or CHECKS:
        CHECKS[check]()
