"""An independent brute-force check of schedules, for the autotune tests (no code under test)."""

STAGE_COUNT = 4


def brute_force_check(trace, jobs, machines, exclusive, tol=1e-9):
    """Asserts every stage of every job ran once, in order, not before its job arrived and, when
    `exclusive`, that at every stage start no resource holds more than its capacity."""
    rows = list(
        zip(
            trace.job.tolist(),
            trace.round.tolist(),
            trace.stage.tolist(),
            trace.machine.tolist(),
            trace.kind.tolist(),
            trace.amount.tolist(),
            trace.start.tolist(),
            trace.finish.tolist(),
        )
    )
    for j, job in enumerate(jobs):
        mine = sorted((r, s, start, finish) for jj, r, s, _, _, _, start, finish in rows if jj == j)
        assert [(r, s) for r, s, _, _ in mine] == [(r, s) for r in range(job.rounds) for s in range(STAGE_COUNT)]
        assert mine[0][2] >= job.arrival - tol
        for before, after in zip(mine, mine[1:]):
            assert after[2] >= before[3] - tol, (job.name, before, after)
    if exclusive:
        for _, _, _, m, k, _, t, _ in rows:
            load = sum(a for _, _, _, mm, kk, a, s, f in rows if mm == m and kk == k and s <= t + tol < f - tol)
            capacity = machines[m].cpu_cores if k == 0 else machines[m].devices
            assert load <= capacity, (m, k, t, load)
