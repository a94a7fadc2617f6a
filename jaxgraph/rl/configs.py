"""Frozen configurations of the agents; `tiny` variants serve tests and CI, defaults follow the thesis."""

from __future__ import annotations

from dataclasses import dataclass

from jaxsched.common.arguments import integer_fields, number_fields


@dataclass(frozen=True)
class PPOConfig:
    """PPO (thesis Algorithm 3): clip 0.3, gamma 0.99, lambda 0.97 as in the thesis; the rest are
    common PPO defaults (the thesis does not state them)."""

    clip: float = 0.3
    gamma: float = 0.99
    lam: float = 0.97
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    learning_rate: float = 3e-4
    max_grad_norm: float = 0.5
    update_epochs: int = 4
    minibatches: int = 4
    normalize_advantages: bool = True
    entropy_final: float | None = None  # host trainer: entropy_coef decays linearly to this over the epochs

    def entropy_at(self, progress: float) -> float:
        """The entropy coefficient after `progress` (0 to 1) of training: constant, or linearly decayed to
        `entropy_final` (exploration early, a sharper policy late)."""
        if self.entropy_final is None:
            return self.entropy_coef
        return self.entropy_coef + min(max(progress, 0.0), 1.0) * (self.entropy_final - self.entropy_coef)

    def __post_init__(self) -> None:
        number_fields(self, 0.0, "clip", "learning_rate", "max_grad_norm", above=True)
        number_fields(self, 0.0, "gamma", "lam", maximum=1.0)
        number_fields(self, 0.0, "value_coef", "entropy_coef")
        number_fields(self, 0.0, "entropy_final", optional=True)
        integer_fields(self, 1, "update_epochs", "minibatches")
        if self.clip >= 1.0:
            raise ValueError(f"PPOConfig.clip must be in (0, 1), got {self.clip}")


@dataclass(frozen=True)
class AgentConfig:
    """The model-free agent: network sizes, rollout shape and length of training."""

    ppo: PPOConfig = PPOConfig()
    hidden: int = 64
    latent: int = 32
    message_steps: int = 2
    num_envs: int = 8
    rollout_steps: int = 32  # lockstep steps per epoch (each epoch starts from the unmodified graphs)
    epochs: int = 200
    max_locations: int = 32
    max_steps: int | None = 100  # episode truncation

    def __post_init__(self) -> None:
        integer_fields(self, 1, "hidden", "latent", "message_steps", "num_envs", "rollout_steps", "epochs",
                       "max_locations")
        integer_fields(self, 1, "max_steps", optional=True)
        if (self.num_envs * self.rollout_steps) % self.ppo.minibatches:
            raise ValueError(f"num_envs x rollout_steps = {self.num_envs * self.rollout_steps} does not split "
                             f"into {self.ppo.minibatches} minibatches")


def tiny_agent() -> AgentConfig:
    """A seconds-long model-free configuration for tests and CI."""
    return AgentConfig(ppo=PPOConfig(learning_rate=1e-3, minibatches=2, update_epochs=4), hidden=32, latent=16,
                       message_steps=1, num_envs=8, rollout_steps=8, epochs=20, max_locations=4, max_steps=12)


@dataclass(frozen=True)
class WorldModelConfig:
    """The MDN-RNN (thesis 4.3.1): LSTM 256 units, 8 Gaussians over a 32-wide latent by default."""

    hidden: int = 256
    mixtures: int = 8
    learning_rate: float = 1e-3
    max_grad_norm: float = 100.0  # only against blow-ups: a tight global clip lets the sharpening latent
    # likelihood's large gradients starve the reward, terminal and mask heads
    reward_coef: float = 1.0
    terminal_coef: float = 1.0
    mask_coef: float = 1.0
    min_log_std: float = -5.0  # floor of the mixture's log standard deviations (keeps the likelihood bounded)
    decay_steps: int | None = None  # cosine decay of the learning rate to 0 over this many updates; a constant
    # rate leaves the sharp mixture oscillating around the fit instead of settling in it

    def __post_init__(self) -> None:
        integer_fields(self, 1, "hidden", "mixtures")
        integer_fields(self, 1, "decay_steps", optional=True)
        number_fields(self, 0.0, "learning_rate", "max_grad_norm", above=True)
        number_fields(self, 0.0, "reward_coef", "terminal_coef", "mask_coef")
        number_fields(self, None, "min_log_std")


@dataclass(frozen=True)
class DreamConfig:
    """A PPO controller trained inside the world model (thesis 4.3.2), PureJaxRL style."""

    ppo: PPOConfig = PPOConfig()
    hidden: int = 64
    num_envs: int = 256  # dream rollouts run in parallel
    rollout_steps: int = 16
    updates: int = 100
    horizon: int = 50  # dream episodes are truncated after this many steps

    def __post_init__(self) -> None:
        integer_fields(self, 1, "hidden", "num_envs", "rollout_steps", "updates", "horizon")
        if (self.num_envs * self.rollout_steps) % self.ppo.minibatches:
            raise ValueError(f"num_envs x rollout_steps = {self.num_envs * self.rollout_steps} does not split "
                             f"into {self.ppo.minibatches} minibatches")
