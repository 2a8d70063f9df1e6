"""One place decides how a run steps its envs: compiled (the envs are written in JAX and
step inside the training program, loop.py) or host (they step on the CPU, host_loop.py).
"""

from __future__ import annotations

from dreamerjax import envs as envs_lib
from dreamerjax.config import keys as configs
from dreamerjax.config.defaults import Config
from dreamerjax.run import host_loop, loop
from dreamerjax.run.loop import Setup


def make_setup(config: Config) -> Setup:
    """Validate the config against the env before anything compiles; the setup of the
    env's path (compiled or host)."""
    configs.validate(config)  # the one check of the values (the CLI's, dreamerjax.train's)
    if envs_lib.parse_env_id(config.run.env)[0].compiled:
        return loop.make_compiled_setup(config)
    return host_loop.make_host_setup(config)
