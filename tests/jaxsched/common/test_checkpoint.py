"""The shared epoch checkpointer: round trip, identity check, fallback past a damaged latest step."""

import shutil

import numpy as np
import pytest

from jaxsched.common import ConfigMismatch, EpochCheckpointer


def _tree(value):
    return {"w": np.full((3,), value, np.float32), "step": np.array(value, np.int32)}


def _save_epochs(directory, epochs, identity=None):
    with EpochCheckpointer(directory, identity or {"run": 1}) as checkpointer:
        for epoch in epochs:
            checkpointer.save(epoch, _tree(epoch), meta={"history": list(range(epoch))})


def test_round_trip_restores_latest_epoch_tree_and_meta(tmp_path):
    _save_epochs(tmp_path, [1, 2])
    with EpochCheckpointer(tmp_path, {"run": 1}) as checkpointer:
        restored = checkpointer.restore_latest(_tree(0))
    assert restored.epoch == 2
    np.testing.assert_array_equal(restored.tree["w"], np.full((3,), 2, np.float32))
    assert restored.meta == {"history": [0, 1]}


def test_empty_directory_restores_none(tmp_path):
    with EpochCheckpointer(tmp_path, {"run": 1}) as checkpointer:
        assert checkpointer.restore_latest(_tree(0)) is None


def test_other_run_is_refused(tmp_path):
    _save_epochs(tmp_path, [1])
    with EpochCheckpointer(tmp_path, {"run": 2}) as checkpointer:
        with pytest.raises(ConfigMismatch, match="different run") as mismatch:
            checkpointer.restore_latest(_tree(0))
    assert mismatch.value.fields == ["run"]


def test_identity_compared_after_json_round_trip(tmp_path):
    _save_epochs(tmp_path, [1], identity={"sizes": (1, 2)})
    with EpochCheckpointer(tmp_path, {"sizes": (1, 2)}) as checkpointer:
        assert checkpointer.restore_latest(_tree(0)).epoch == 1


@pytest.mark.parametrize("damage", ["remove_tree", "truncate"])
def test_damaged_latest_step_falls_back_and_training_can_continue(tmp_path, damage):
    _save_epochs(tmp_path, [1, 2])
    latest = tmp_path / "2"
    if damage == "remove_tree":
        shutil.rmtree(latest / "tree")
    else:
        for path in (latest / "tree").rglob("*"):
            if path.is_file() and path.stat().st_size > 0:
                path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with EpochCheckpointer(tmp_path, {"run": 1}) as checkpointer:
        with pytest.warns(UserWarning, match="damaged"):
            restored = checkpointer.restore_latest(_tree(0))
        assert restored.epoch == 1
        np.testing.assert_array_equal(restored.tree["w"], np.full((3,), 1, np.float32))
        checkpointer.save(2, _tree(20))  # the redone epoch replaces the damaged one
    with EpochCheckpointer(tmp_path, {"run": 1}) as checkpointer:
        assert int(checkpointer.restore_latest(_tree(0)).tree["step"]) == 20


def test_no_intact_step_raises_naming_the_directory(tmp_path):
    _save_epochs(tmp_path, [1])
    shutil.rmtree(tmp_path / "1" / "tree")
    with EpochCheckpointer(tmp_path, {"run": 1}) as checkpointer:
        with pytest.warns(UserWarning), pytest.raises(ValueError, match=str(tmp_path)):
            checkpointer.restore_latest(_tree(0))


def test_read_only_checkpointer_restores_any_run_but_cannot_save(tmp_path):
    _save_epochs(tmp_path, [1])
    with EpochCheckpointer(tmp_path) as checkpointer:
        assert checkpointer.restore_latest().epoch == 1
        with pytest.raises(ValueError, match="read-only"):
            checkpointer.save(2, _tree(2))


def test_python_scalar_targets_and_unserialisable_identities(tmp_path):
    with EpochCheckpointer(tmp_path, identity={"run": 1}) as checkpointer:
        checkpointer.save(1, {"step": np.int32(3), "weights": np.ones(2, np.float32)})
        restored = checkpointer.restore_latest({"step": 0, "weights": np.zeros(2, np.float32)})  # was AttributeError
    assert int(restored.tree["step"]) == 3
    with pytest.raises(ValueError, match="identity must be JSON-serialisable"):
        EpochCheckpointer(tmp_path / "other", identity={"config": object()})  # was TypeError
