"""Behaviour Suite (bsuite) experiments as host envs (`--env bsuite_catch/0`,
`bsuite_mnist/0`, `bsuite_deep_sea/3`; `bsuite_catch` means `bsuite_catch/0`).

The semantics of the reference's BSuite env (embodied/envs/bsuite.py at 29eb964: bsuite's
`load_from_id`, then FromDM, ForceDtypes and FlattenTwoDimObs, embodied/core/wrappers.py):

- one observation key, `observation` (FromDM's name for a single array, from_dm.py:9),
  float32 (ForceDtypes), a [rows, cols] observation flattened to [rows * cols]
  (FlattenTwoDimObs; catch's 10 x 5 board is 50 numbers, MNIST's image 784);
- the experiment's discrete actions; reward as float32;
- is_terminal where bsuite's discount is 0 (from_dm.py:75), which bsuite also gives at
  its own step limits (mountain_car's 1,000 steps end as a termination);
- the seed: bsuite's sweep leaves most experiments' `seed` None (catch, cartpole, mnist,
  mountain_car and their variants: each construction draws its own episodes; the
  `mapping_seed` of bandit, deep_sea and discounting_chain is fixed per id), so the
  reference's runs are not seeded. reset(seed) builds the experiment with the sweep's
  settings and `seed` where the sweep leaves it None or unset (bsuite.load with the id's
  settings, as load_from_id), so the same seed plays the same episodes.

No `log_` keys: the reference emits none for BSuite. The reference also ends its process
ten minutes after the experiment's `bsuite_num_episodes` episodes (bsuite.py:35-45), so
that bsuite's CSV logging (which it does not switch on) would finish; here run.steps ends
a run (docs/deviations.md).

At e3f0224 the reference's bsuite.py calls `bsuite.from_checkpoint_id` and the
ForceDtypes / FlattenTwoDimObs wrappers, none of which exist there (bsuite 0.3.6 has
`load_from_id`; e3f0224's wrappers.py has them commented out), so its BSuite cannot be
built: a run of either version gets the chain above.

`mnist` reads the MNIST files that bsuite downloads into its cache directory (/tmp/mnist)
on first use; without network access that step fails with the one-line reason.
"""

from __future__ import annotations

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space
from dreamerjax.envs.registry import MissingExtra

# bsuite's episodes all end within this many steps (cartpole's and mountain_car's own
# limits are the longest; catch is 9 steps, mnist and bandit 1, deep_sea its size).
LONGEST_EPISODE = 1000


def _bsuite():
    # bsuite uses the alias np.int, which numpy removed (1.24); the reference patches it
    # the same way before importing bsuite (bsuite.py:13).
    if not hasattr(np, "int"):
        np.int = int
    import bsuite
    return bsuite


def experiments() -> dict[str, int]:
    """Experiment name -> how many ids its sweep has (`name/0` ... `name/N-1`)."""
    from bsuite import sweep
    out: dict[str, int] = {}
    for bsuite_id in sweep.SWEEP:
        name = bsuite_id.split("/")[0]
        out[name] = out.get(name, 0) + 1
    return out


def settings(bsuite_id: str, seed: int | None) -> dict:
    """The sweep's constructor settings of an id, with `seed` where the sweep leaves it
    None or unset (the module docstring)."""
    import inspect

    from bsuite import bsuite as loader
    from bsuite import sweep
    kwargs = dict(sweep.SETTINGS[bsuite_id])
    name = bsuite_id.split("/")[0]
    accepts = "seed" in inspect.signature(loader.EXPERIMENT_NAME_TO_ENVIRONMENT[name]).parameters
    if seed is not None and kwargs.get("seed") is None and (accepts or "seed" in kwargs):
        kwargs["seed"] = int(seed)
    return kwargs


def bsuite_id(task: str, env_id: str) -> str:
    """`name` or `name/k` -> bsuite's `name/k` (bsuite.py:16-17), checked against the sweep."""
    _bsuite()
    name, _, index = task.partition("/")
    index = index or "0"
    known = experiments()
    if name not in known:
        raise ValueError(f"--env {env_id}: unknown bsuite experiment {name!r}; experiments: "
                         f"{', '.join(sorted(known))}")
    if not index.isdigit() or int(index) >= known[name]:
        raise ValueError(f"--env {env_id}: bsuite experiment {name!r} has ids "
                         f"{name}/0 ... {name}/{known[name] - 1}, not {task!r}")
    return f"{name}/{int(index)}"


class BSuiteEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None):
        env_id = self.env_id = env_id or f"bsuite_{task}"
        self.bsuite_id = bsuite_id(task, env_id)
        self._env = self._load(None)
        obs = self._env.observation_spec()
        act = self._env.action_spec()
        if isinstance(obs, dict) or isinstance(act, dict) or not hasattr(act, "num_values"):
            raise ValueError(f"--env {env_id}: expected one array observation and discrete "
                             "actions")
        self._size = int(np.prod(obs.shape))
        self.num_episodes = int(self._env.bsuite_num_episodes)
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, (("observation", (self._size,), "float32"),)),
            discrete=True, num_actions=int(act.num_values), action_dims=0,
            episode_limit=LONGEST_EPISODE)

    def _load(self, seed: int | None):
        import urllib.error
        bsuite = _bsuite()
        name = self.bsuite_id.split("/")[0]
        try:
            env = bsuite.load(name, settings(self.bsuite_id, seed))
        except (urllib.error.URLError, OSError) as e:
            raise MissingExtra(f"env {self.env_id!r} needs the MNIST files, which bsuite "
                               f"downloads into /tmp/mnist on first use and could not "
                               f"({e})") from e
        return env

    def _obs(self, time_step) -> dict[str, np.ndarray]:
        value = np.asarray(time_step.observation, np.float32)
        # FlattenTwoDimObs flattens [rows, cols]; an observation of another rank keeps its
        # shape there, which the rows carry only as a vector.
        return {"observation": value.reshape(self._size)}

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._env = self._load(int(seed))
        return self._obs(self._env.reset())

    def step(self, action):
        ts = self._env.step(int(action))
        if ts.discount not in (0, 1):  # from_dm.py:66-67
            raise ValueError(f"{self.spec.env_id}: discount {ts.discount} is neither 0 nor 1")
        terminal = bool(ts.last() and ts.discount == 0)
        reward = float(np.float32(ts.reward))
        return self._obs(ts), reward, terminal, bool(ts.last() and not terminal), {}


make = BSuiteEnv  # the registry's constructor: make(task, env_id=..., **settings)
