"""The shared workdir: atomic writes, stages computed once, another configuration refused by name; presets."""

import dataclasses
import json

import numpy as np
import pytest

from jaxsched.common import (
    ConfigMismatch,
    EpochCheckpointer,
    Workdir,
    differing_fields,
    named_config,
    read_json,
    write_json,
)


@dataclasses.dataclass(frozen=True)
class Inner:
    size: int = 2
    sizes: tuple[int, ...] = (1, 2)


@dataclasses.dataclass(frozen=True)
class Config:
    inner: Inner = Inner()
    rate: float = 0.5


def test_stage_is_computed_once_and_read_back(tmp_path):
    calls = []
    work = Workdir(tmp_path / "run", Config())
    compute = lambda: calls.append(1) or {"value": np.float32(1.5), "ids": (1, 2)}  # noqa: E731
    assert work.stage("stages/a.json", compute) == {"value": 1.5, "ids": [1, 2]}
    again = Workdir(tmp_path / "run", Config())  # a rerun of the same configuration (tuples compare as lists)
    assert again.stage("stages/a.json", compute) == {"value": 1.5, "ids": [1, 2]} and calls == [1]
    assert json.loads((tmp_path / "run" / "config.json").read_text()) == {"inner": {"size": 2, "sizes": [1, 2]},
                                                                          "rate": 0.5}


def test_another_configuration_is_refused_naming_the_folder_and_fields(tmp_path):
    Workdir(tmp_path, Config())
    with pytest.raises(ConfigMismatch) as mismatch:
        Workdir(tmp_path, Config(inner=Inner(size=3, sizes=(1,)), rate=0.5))
    assert isinstance(mismatch.value, ValueError) and mismatch.value.directory == tmp_path
    assert mismatch.value.fields == ["inner.size", "inner.sizes"]
    assert str(tmp_path) in str(mismatch.value) and "inner.size, inner.sizes" in str(mismatch.value)
    assert differing_fields({"a": 1}, {"b": 1}) == ["a", "b"] and differing_fields(1, 2) == ["config"]


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "out.json"
    write_json(path, {"a": 1})
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        write_json(path, {"a": object()})  # fails before the rename: the old file stays whole
    assert read_json(path) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["out.json"]
    assert read_json(tmp_path / "missing.json") is None
    path.write_text("{")
    with pytest.raises(ValueError, match="out.json is not valid JSON"):
        read_json(path)


def test_preset_names_every_choice_in_one_line():
    assert named_config({"test": 1, "default": 2}, "default") == 2
    with pytest.raises(ValueError, match="^unknown config 'tiny'; choose one of test, default$"):
        named_config({"test": 1, "default": 2}, "tiny")


def test_a_training_loops_checkpoints_live_in_its_workdir_and_refuse_another_run_before_any_epoch(tmp_path):
    """`Workdir.checkpointer`: the folder records the identity at once, so a run of another configuration is refused
    even when the first one was killed before its first checkpoint; the orbax steps sit beside config.json and a
    reader of any run (identity None) finds them."""
    tree = {"w": np.zeros(3, np.float32)}
    with Workdir(tmp_path, {"epochs": 4, "seed": 0}).checkpointer():
        pass  # killed before the first epoch ended
    with pytest.raises(ConfigMismatch, match="different run") as mismatch:
        Workdir(tmp_path, {"epochs": 4, "seed": 1}).checkpointer()
    assert mismatch.value.fields == ["seed"]
    with Workdir(tmp_path, {"epochs": 4, "seed": 0}).checkpointer() as checkpointer:
        assert checkpointer.restore_latest(tree) is None
        checkpointer.save(1, {"w": np.ones(3, np.float32)}, meta=[1.0])
    assert read_json(tmp_path / "config.json") == {"epochs": 4, "seed": 0}
    with Workdir(tmp_path, {"epochs": 4, "seed": 0}).checkpointer() as checkpointer:
        restored = checkpointer.restore_latest(tree)
    assert restored.epoch == 1 and restored.meta == [1.0]
    np.testing.assert_array_equal(restored.tree["w"], np.ones(3, np.float32))
    with EpochCheckpointer(tmp_path) as reader:
        assert reader.restore_latest().epoch == 1
