"""One place decides how a run steps its envs: compiled (the envs are written in JAX and
step inside the training program, loop.py) or host (they step on the CPU, host_loop.py).
"""

from __future__ import annotations

from dreamerjax import envs as envs_lib
from dreamerjax.config.defaults import Config
from dreamerjax.run import host_loop, loop
from dreamerjax.run.loop import Setup


def make_setup(config: Config) -> Setup:
    """The setup of a validated config (run/plan.make_plan validates, then calls this):
    the env's path, compiled or host, as the registry says (Setup.host records it), and
    the checks of the run against the env's spaces."""
    if envs_lib.parse_env_id(config.run.env)[0].compiled:
        return loop.make_compiled_setup(config)
    return host_loop.make_host_setup(config)
