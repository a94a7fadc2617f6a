"""Frozen configurations of the agents; `tiny` variants serve tests and CI, defaults follow the thesis."""

from __future__ import annotations

from dataclasses import dataclass


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

    def __post_init__(self) -> None:
        if not 0.0 < self.clip < 1.0 or not 0.0 <= self.gamma <= 1.0 or not 0.0 <= self.lam <= 1.0:
            raise ValueError(f"need 0 < clip < 1 and gamma, lambda in [0, 1], got {self.clip}, {self.gamma}, "
                             f"{self.lam}")
        if self.update_epochs < 1 or self.minibatches < 1 or self.learning_rate <= 0:
            raise ValueError("update_epochs, minibatches and learning_rate must be positive")
