"""Sample-efficiency curves (`jaxgraph.rl.efficiency`) on hand-worked numbers."""

from types import SimpleNamespace

from jaxgraph.rl.efficiency import best_so_far, checkpoints, extend, model_free_recorder, steps_to_reach, value_at
from jaxgraph.rl.episode import Episode


def test_best_so_far_keeps_only_improvements_and_extend_counts_every_episode_step():
    assert best_so_far([(0, 10.0), (3, 12.0), (5, 9.0), (6, 9.0), (9, 4.0)]) == [[0, 10.0], [5, 9.0], [9, 4.0]]
    episodes = [Episode([(0, 0), (1, 0)], [9.0, 7.0, 8.0]), Episode([(2, 0)], [9.0, 9.0])]
    curve, end = extend([[0, 9.0]], 10, episodes)
    assert (curve, end) == ([[0, 9.0], [12, 7.0]], 13)  # the first episode's 2 steps found 7; the second nothing
    assert [value_at(curve, s) for s in (0, 11, 12, 100)] == [9.0, 9.0, 7.0, 7.0]
    assert steps_to_reach(curve, 7.0) == 12 and steps_to_reach(curve, 6.9) is None
    assert checkpoints([[[0, 1.0], [1000, 0.5]]], 4) == [1, 10, 100, 1000]


def test_model_free_recorder_evaluates_every_k_epochs_and_counts_its_own_steps():
    calls = []

    def evaluate(agent):
        calls.append(agent.env_steps)
        return [Episode([(0, 0)] * 3, [5.0, 4.0 - len(calls), 6.0, 6.0])]

    on_epoch, read = model_free_recorder(evaluate, 5.0, every=2)
    for epoch in range(1, 6):
        assert on_epoch(SimpleNamespace(history=[{}] * epoch, env_steps=100 * epoch)) is False
    assert calls == [200, 400]
    # epoch 2: 200 training steps + 3 evaluation steps found 3.0; epoch 4: 400 + 3 earlier + 3 found 2.0
    assert read() == ([[0, 5.0], [203, 3.0], [406, 2.0]], 6)


def test_model_free_recorder_resumes_from_its_file_as_if_never_killed(tmp_path):
    """A run killed after epoch 3 and resumed from its checkpoint at epoch 3 draws the uninterrupted run's curve;
    a stale evaluation of a lost later checkpoint (epoch 4) is dropped and redone."""
    def evaluate(agent):  # the cost found depends on the epoch only, as a restored agent's would
        return [Episode([(0, 0)] * 2, [9.0, 9.0 - len(agent.history), 9.5])]

    def run(on_epoch, epochs):
        for epoch in epochs:
            on_epoch(SimpleNamespace(history=[{}] * epoch, env_steps=10 * epoch))

    whole_on_epoch, whole = model_free_recorder(evaluate, 9.0, every=1)
    run(whole_on_epoch, range(1, 7))
    path = tmp_path / "curve.json"
    run(model_free_recorder(evaluate, 9.0, every=1, path=path)[0], range(1, 5))  # killed after epoch 4's record
    resumed_on_epoch, resumed = model_free_recorder(evaluate, 9.0, every=1, path=path)  # checkpoint 4 was lost
    run(resumed_on_epoch, range(4, 7))
    # by hand: epoch e's 2-step episode runs after 10 e training + 2 (e - 1) evaluation steps and finds 9 - e,
    # counted once the episode has run: at 12 e steps
    assert whole() == ([[0, 9.0]] + [[12 * e, 9.0 - e] for e in range(1, 7)], 12)
    assert resumed() == whole()
