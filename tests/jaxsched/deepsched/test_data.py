"""HEFT labels of the training data: on the CPU they are `jaxsched.heft`'s schedules, to the last bit."""

import jax
import numpy as np
import pytest

from jaxsched import Shape, heft
from jaxsched.deepsched.data import label
from jaxsched.deepsched.features import time_scale
from jaxsched.generate import random_dag


def test_cpu_labels_are_the_numpy_heft_schedules():
    problems = [random_dag(n, 4, ccr=c, seed=n) for n, c in ((9, 0.5), (14, 5.0), (20, 1.0))]  # fractional costs
    data = label(problems, Shape.of(problems), chunk=2, progress=False)  # two chunks, the last filled up
    for i, problem in enumerate(problems):
        t, reference = problem.num_tasks, heft(problem)
        np.testing.assert_array_equal(data.labels.proc[i, :t], reference.proc)
        expected = (np.stack([reference.start, reference.finish], axis=1) / time_scale(problem)).astype(np.float32)
        np.testing.assert_array_equal(data.labels.times[i, :t], expected)
        assert not data.labels.times[i, t:].any()


@pytest.mark.parametrize("devices", [0, -3, "one more than there are"])
def test_a_device_count_outside_what_there_is_is_refused_on_the_cpu_too(devices):
    devices = len(jax.devices()) + 1 if isinstance(devices, str) else devices
    problems = [random_dag(6, 2, seed=0)]
    with pytest.raises(ValueError, match=f"asked for {devices} devices, {len(jax.devices())} are available"):
        label(problems, Shape.of(problems), progress=False, devices=devices)
