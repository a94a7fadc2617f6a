"""Every config checks its fields through `jaxsched.common.arguments`: the same bad value fails alike in every
package, with an error naming `Config.field` (the messages below are written out by hand)."""

import dataclasses
import math

import pytest

from experiments.graphopt_rl import CONFIGS as GRAPH_CONFIGS
from experiments.graphopt_rl import GeneralistConfig
from jaxgraph.rl import AgentConfig, DreamConfig, PPOConfig, WorldModelConfig
from jaxsched.common.arguments import integer_fields, number_fields
from jaxsched.deepsched.configs import ModelConfig, TrainConfig


@pytest.mark.parametrize("make, message", [
    (lambda: AgentConfig(hidden=1.5), "AgentConfig.hidden must be an integer >= 1, got 1.5"),
    (lambda: ModelConfig(hidden=1.5), "ModelConfig.hidden must be an integer >= 1, got 1.5"),
    (lambda: TrainConfig(epochs=2.5), "TrainConfig.epochs must be an integer >= 0, got 2.5"),
    (lambda: DreamConfig(updates=2.5), "DreamConfig.updates must be an integer >= 1, got 2.5"),
    (lambda: PPOConfig(learning_rate=math.nan), "PPOConfig.learning_rate must be finite, got nan"),
    (lambda: TrainConfig(learning_rate=math.nan), "TrainConfig.learning_rate must be finite, got nan"),
    (lambda: WorldModelConfig(learning_rate=math.nan), "WorldModelConfig.learning_rate must be finite, got nan"),
    (lambda: PPOConfig(learning_rate=0.0), "PPOConfig.learning_rate must be > 0.0, got 0.0"),
    (lambda: TrainConfig(learning_rate=0.0), "TrainConfig.learning_rate must be > 0.0, got 0.0"),
    (lambda: PPOConfig(update_epochs=True), "PPOConfig.update_epochs must be an integer >= 1, got True"),
    (lambda: PPOConfig(gamma=1.5), "PPOConfig.gamma must be in [0.0, 1.0], got 1.5"),
    (lambda: PPOConfig(clip=1.0), "PPOConfig.clip must be in (0, 1), got 1.0"),
    (lambda: AgentConfig(max_steps=0), "AgentConfig.max_steps must be an integer >= 1, got 0"),
    (lambda: WorldModelConfig(decay_steps=2.5), "WorldModelConfig.decay_steps must be an integer >= 1, got 2.5"),
    (lambda: GeneralistConfig(samples=2.5), "GeneralistConfig.samples must be an integer >= 0, got 2.5"),
    (lambda: dataclasses.replace(GRAPH_CONFIGS["test"], seeds=1.5),
     "GraphoptConfig.seeds must be an integer >= 1, got 1.5"),
    (lambda: dataclasses.replace(GRAPH_CONFIGS["test"], saturation_seconds=math.nan),
     "GraphoptConfig.saturation_seconds must be finite, got nan"),
])
def test_the_same_bad_value_fails_alike_in_every_config(make, message):
    with pytest.raises(ValueError) as error:
        make()
    assert str(error.value) == message


def test_optional_fields_pass_none_and_checks_pass_good_values():
    assert AgentConfig(max_steps=None).max_steps is None and PPOConfig(entropy_final=None).entropy_final is None

    class Config:
        count, rate, cap = 3, 0.5, None

    integer_fields(Config(), 1, "count")
    number_fields(Config(), 0.0, "rate", maximum=1.0, above=True)
    number_fields(Config(), 0.0, "cap", optional=True)
    with pytest.raises(ValueError, match=r"^Config.cap must be a real number, got None$"):
        number_fields(Config(), 0.0, "cap")
