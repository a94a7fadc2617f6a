"""The Ray backend on a local two-node cluster: one machine per node, the device a custom resource of 1;
faults (a raising stage, a dying worker, an out-of-memory profile) fail their job only."""

import numpy as np
import pytest

from jaxsched.autotune import Machine, MockJob, check_trace

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from jaxsched.autotune.ray_backend import node_resources, run_on_ray  # noqa: E402
from tests.jaxsched.autotune.faulty import WIDE, Dying, Hungry, Raising, Tally, replay  # noqa: E402
from tests.jaxsched.autotune.reference import brute_force_check  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    machines = [Machine(1, 1), Machine(1, 1)]
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": node_resources(0, machines[0])})
    node = cluster.add_node(num_cpus=1, resources=node_resources(1, machines[1]))
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    yield machines, {0: cluster.head_node.node_id, 1: node.node_id}
    ray.shutdown()
    cluster.shutdown()


def test_tiny_mix_on_two_nodes(cluster):
    machines, node_of = cluster
    rng = np.random.default_rng(0)
    jobs = [MockJob(f"j{j}", rng.choice([0.02, 0.05], size=(2, 4))) for j in range(4)]  # round-robin: 0, 1, 0, 1
    run, nodes = run_on_ray(jobs, machines, "load_aware")
    brute_force_check(run.trace, jobs, machines, exclusive=True)
    check_trace(run.trace, [2] * 4, machines)
    assert [node_of[m] for m in run.trace.machine.tolist()] == nodes  # every stage ran on its machine's node
    assert set(nodes) == set(node_of.values())
    with pytest.raises(ValueError, match="has 0 of resource 'autotune_m2_cpu', machine 2 needs 1.0"):
        run_on_ray(jobs, machines + [Machine(1, 1)], "load_aware")


def test_faults_fail_their_job_only_and_a_dead_worker_is_replaced(cluster, tmp_path):
    machines, _ = cluster
    good = [Tally(f"g{j}", 2) for j in range(3)]
    faulty = [Raising("raising", 2), Dying("dying", 2), Hungry("hungry", 2)]
    with pytest.warns(UserWarning, match="6 jobs: 3 finished, 3 failed"):
        run, nodes = run_on_ray(good + faulty, machines, "load_aware")
    assert run.results == {job.name: replay(job) for job in good}
    assert run.failures["raising"] == "stage 'build' of round 1: ArithmeticError: the compiler fell over"
    assert run.failures["dying"].startswith("stage 'build' of round 1: WorkerCrashedError: ")
    assert run.failures["hungry"].startswith("stage 'profile' of round 0: JaxRuntimeError: RESOURCE_EXHAUSTED")
    assert len(nodes) == run.trace.job.size
    # with one retry the dying job's round 1 runs again in a new worker, from the state at its start
    revived = Dying("dying", 2, marker=tmp_path / "died-once")
    run, _ = run_on_ray([good[0], revived], machines, "load_aware", retries=1)
    assert run.failures == {} and run.results == {job.name: replay(Tally(job.name, 2)) for job in (good[0], revived)}
    check_trace(run.trace, [2, 2], machines)
    with pytest.raises(ValueError, match="job 'wide': stage 'build' needs 64 cpu units, machine 1 has 1"):
        run_on_ray(good + [Tally("wide", 1, WIDE)], machines, "load_aware")
