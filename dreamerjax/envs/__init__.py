"""Environments as observation-aligned row streams (see envs/core.py for the row contract)."""

from dreamerjax.envs.core import (
    ENV_IDS,
    CollectorState,
    EnvSpec,
    EpisodeEnd,
    Row,
    collector_init,
    collector_step,
    make_env,
    replay_row,
    to_env_action,
)

__all__ = [
    "ENV_IDS",
    "CollectorState",
    "EnvSpec",
    "EpisodeEnd",
    "Row",
    "collector_init",
    "collector_step",
    "make_env",
    "replay_row",
    "to_env_action",
]
