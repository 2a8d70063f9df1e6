"""Memory Maze as host envs (`--env memmaze_9x9`, `memmaze_11x11`, `memmaze_13x13`,
`memmaze_15x15`).

The reference builds it in dreamerv3/main.py, not in embodied/envs: FromGym over the gym
registration of memory_maze (memory_maze/__init__.py: the dm_env task of that size in
memory_maze's GymWrapper), `MemoryMaze-{size}-ExtraObs-v0` at 29eb964 (main.py:193-195,
211-212) and `MemoryMaze-{size}-v0` at e3f0224 (main.py:214-216, 232-233; its preset list
has no `memmaze`, the suite is still built). The dm_env task is built here directly with
the same arguments, and the GymWrapper's and FromGym's steps are reproduced:

- `extra_obs` True (29eb964; env.memmaze.extra_obs, ours): the ExtraObs keys `image`
  (64 x 64 x 3 uint8 egocentric camera), `target_color`, `agent_pos`, `agent_dir`,
  `targets_vec`, `targets_pos`, `target_vec`, `target_pos`, `maze_layout`, the others
  as float32 vectors (a [rows, cols] array flattened, as the gym suite does; the
  reference keeps them float64 / uint8 and [rows, cols], docs/deviations.md);
  False (e3f0224): `image` only;
- 6 discrete actions; reward as float32 (from_gym.py:74-75);
- the episode ends at the maze's time limit only (1,000 / 2,000 / 3,000 / 4,000 agent
  steps for 9x9 / 11x11 / 13x13 / 15x15 at 4 steps a second): is_last without
  is_terminal. The reference's FromGym marks it is_terminal (GymWrapper gives `done` and
  no `is_terminal`, from_gym.py:67-69), docs/deviations.md;
- the seed: memory_maze's `seed`, which draws the maze layouts and the targets (the
  reference's gym.make passes env kwargs through to the task).

No `log_` keys: the reference emits none for Memory Maze. Rendering needs OpenGL as the
DMC suite does (MUJOCO_GL, envs/host/dmc.py); memory_maze sets MUJOCO_GL=egl when unset.
"""

from __future__ import annotations

import os

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space, import_quietly

SIZES = ("9x9", "11x11", "13x13", "15x15")


class MemoryMazeEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, extra_obs: bool = True):
        os.environ.setdefault("MUJOCO_GL", "egl")
        env_id = env_id or f"memmaze_{task}"
        if task not in SIZES:
            raise ValueError(f"--env {env_id}: unknown Memory Maze size {task!r}; sizes: "
                             f"{', '.join(SIZES)}")
        self.task, self.extra_obs = task, bool(extra_obs)
        # Built with seed 0 for its spaces, and kept for a first reset with that seed:
        # building a maze costs seconds.
        self._env, self._unused_seed = self._make(0), 0
        spec = self._env.observation_spec()
        spec = spec if isinstance(spec, dict) else {"image": spec}
        obs_space = []
        for key, value in spec.items():
            if key == "image":
                obs_space.append((key, tuple(int(d) for d in value.shape), "uint8"))
            else:
                obs_space.append((key, (int(np.prod(value.shape)),), "float32"))
        self._keys = tuple(spec)
        inner = self._env
        while not hasattr(inner, "control_timestep"):
            inner = inner._env
        # composer's time limit is the size's seconds less 1e-3 (memory_maze/tasks.py).
        limit = int(round(inner._time_limit / inner.control_timestep()))
        self.spec = HostSpec(
            env_id=env_id, obs_space=check_obs_space(env_id, tuple(obs_space)),
            discrete=True, num_actions=int(self._env.action_spec().num_values),
            action_dims=0, episode_limit=limit)

    def _make(self, seed: int | None):
        tasks = import_quietly("memory_maze.tasks")
        ctor = getattr(tasks, f"memory_maze_{self.task}")
        if self.extra_obs:
            return ctor(global_observables=True, seed=seed)  # the ExtraObs registration
        return ctor(image_only_obs=True, seed=seed)  # MemoryMaze-{size}-v0

    def _obs(self, time_step) -> dict[str, np.ndarray]:
        obs = time_step.observation
        obs = obs if isinstance(obs, dict) else {"image": obs}
        return {k: (np.asarray(obs[k], np.uint8) if k == "image"
                    else np.asarray(obs[k], np.float32).reshape(-1)) for k in self._keys}

    def reset(self, seed: int | None = None):
        if seed is not None and seed != self._unused_seed:
            self._env.close()
            self._env = self._make(int(seed))
        self._unused_seed = None
        return self._obs(self._env.reset())

    def step(self, action):
        index = int(action)
        if not 0 <= index < self.spec.num_actions:
            raise ValueError(f"{self.spec.env_id}: action {index} outside "
                             f"[0, {self.spec.num_actions})")
        ts = self._env.step(index)
        terminal = bool(ts.last() and ts.discount == 0)
        return (self._obs(ts), float(np.float32(ts.reward)), terminal,
                bool(ts.last() and not terminal), {})

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


make = MemoryMazeEnv  # the registry's constructor: make(task, env_id=..., **settings)
