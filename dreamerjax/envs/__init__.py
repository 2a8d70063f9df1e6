"""Environments as observation-aligned row streams.

envs/core.py holds the row contract and the collector; one module per suite builds an
`EnvSpec` for its ids (envs/registry.py maps an id's `SUITE_` prefix to its module and
extra). `make_env("gymnax_CartPole-v1")`, `make_env("CartPole-v1")` (a bare gymnax id).
"""

from dreamerjax.envs.core import (
    CollectorState,
    EnvSpec,
    EpisodeEnd,
    ObsSpace,
    Row,
    Step,
    box_action,
    collector_init,
    collector_step,
    from_env_action,
    make_env,
    replay_row,
    row_spec,
    spaces_of,
    suite_options,
    to_env_action,
)
from dreamerjax.envs.registry import SUITES, MissingExtra, Suite, parse_env_id, register

__all__ = [
    "SUITES",
    "CollectorState",
    "EnvSpec",
    "EpisodeEnd",
    "MissingExtra",
    "ObsSpace",
    "Row",
    "Step",
    "Suite",
    "box_action",
    "collector_init",
    "collector_step",
    "from_env_action",
    "make_env",
    "parse_env_id",
    "register",
    "replay_row",
    "row_spec",
    "spaces_of",
    "suite_options",
    "to_env_action",
]
