"""The DeepMind Control Suite through dm_control as host envs (`--env dmc_walker_walk`).

The semantics of the reference's DMC env (embodied/envs/dmc.py with from_dm.py and the
ActionRepeat / ExpandScalars wrappers at 29eb964), settings configs.yaml:84:

- `dmc_DOMAIN_TASK`, split at the first underscore of the task (dmc.py:20); domain `cup`
  is `ball_in_cup` (dmc.py:23-24);
- proprioceptive keys from the observation spec, '/' replaced by '_', an observation named
  `reward` renamed `obs_reward`, empty ones dropped (from_dm.py:20-39), scalars as [1]
  (ExpandScalars), all as float32 vectors;
- `repeat` (2): the action is repeated, stopping early at an episode end
  (wrappers.py:39-55); each physics step's reward is rounded to float32 (FromDM,
  from_dm.py:72) and those are summed in float64 (ActionRepeat starts from a Python float,
  wrappers.py:48-54), the sum rounded to float32 in the row;
- the action: clipped and mapped to the spec's bounds in the reference's dtypes
  (host.normalized_action: float32 action, float64 bounds);
- `image`: a [size..., 3] uint8 camera image `image` rendered after every step and reset
  (dmc.py:58-68); camera -1 picks the domain's default (quadruped 2, else 0, dmc.py:10-22);
- is_terminal where dm_env's discount is 0 (from_dm.py:75); the suite's 1000-step limit
  has discount 1, so it is a time-limit end.

Rendering needs OpenGL: MUJOCO_GL defaults to `egl` (as the reference, dmc.py:17-18),
which on a machine without a GPU runs Mesa's software renderer (Debian: libegl1,
libegl-mesa0, libopengl0, libgl1-mesa-dri); `MUJOCO_GL=osmesa` needs libosmesa6. Where
egl cannot load and MUJOCO_GL was not set, an env without `image` goes on with no
renderer (MUJOCO_GL=disable; import_suite).

Not rendered when `image` is False: the reference then renders `log_image` for videos
only (dmc.py:50-51), which this port does not record.
"""

from __future__ import annotations

import os

import numpy as np

from dreamerjax.envs.host.base import (
    HostEnv,
    HostSpec,
    box_fields,
    check_obs_space,
    normalized_action,
)

DEFAULT_CAMERAS = {"quadruped": 2}  # dmc.py:10-13 (locom_rodent is not a suite domain)


def _obs_name(key: str) -> str:
    key = "obs_reward" if key == "reward" else key
    return key.replace("/", "_")


class DMCEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, repeat: int = 2,
                 size=(64, 64), image: bool = True, camera: int = -1):
        env_id = env_id or f"dmc_{task}"
        domain, sep, name = task.partition("_")
        if not sep or not name:
            raise ValueError(f"--env {env_id}: expected dmc_DOMAIN_TASK")
        if camera == -1:
            camera = DEFAULT_CAMERAS.get(domain, 0)
        if domain == "cup":
            domain = "ball_in_cup"
        if domain in ("manip", "locom"):
            raise ValueError(f"--env {env_id}: the reference's manipulation and locomotion "
                             "domains are not supported; use a dm_control suite domain")
        if repeat < 1:
            raise ValueError(f"env.dmc.repeat must be >= 1, got {repeat}")
        suite = import_suite(env_id, renders=image)
        if (domain, name) not in suite.ALL_TASKS:
            known = ", ".join(f"{d}_{t}" for d, t in suite.ALL_TASKS)
            raise ValueError(f"--env {env_id}: unknown task; dm_control has {known}")
        self._domain, self._task = domain, name
        self._suite = suite
        self._env = suite.load(domain, name)
        self.repeat, self.size = int(repeat), tuple(int(s) for s in size)
        self.image, self.camera = bool(image), int(camera)
        spec = self._env.observation_spec()
        self._keys = []
        obs_space = []
        for key, value in spec.items():
            size_ = int(np.prod(value.shape))
            if size_ == 0:
                continue
            self._keys.append(key)
            obs_space.append((_obs_name(key), (size_,), "float32"))
        if self.image:
            obs_space.append(("image", (*self.size, 3), "uint8"))
        act = self._env.action_spec()
        self._act_shape = tuple(act.shape)
        # The spec's own dtype (float64 in dm_control), as the reference's Space keeps it.
        self._low = np.broadcast_to(np.asarray(act.minimum), act.shape).ravel()
        self._high = np.broadcast_to(np.asarray(act.maximum), act.shape).ravel()
        limit = self._env._step_limit if hasattr(self._env, "_step_limit") else 0
        self.spec = HostSpec(
            env_id=env_id, obs_space=check_obs_space(env_id, tuple(obs_space)),
            discrete=False, num_actions=0, action_dims=int(np.prod(act.shape)),
            **box_fields(self._low, self._high, self._act_shape),
            episode_limit=-(-int(limit) // self.repeat) if np.isfinite(limit) else 0)

    @property
    def physics(self):
        return self._env.physics

    def _obs(self, time_step) -> dict[str, np.ndarray]:
        obs = {_obs_name(k): np.asarray(time_step.observation[k], np.float32).reshape(-1)
               for k in self._keys}
        if self.image:
            obs["image"] = self._env.physics.render(*self.size, camera_id=self.camera)
        return obs

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._env = self._suite.load(self._domain, self._task,
                                         task_kwargs={"random": int(seed)})
        return self._obs(self._env.reset())

    def step(self, action):
        ts, reward = repeat_step(self._env, action, (self._low, self._high, self._act_shape),
                                 self.repeat, self.spec.env_id)
        terminal = bool(ts.last() and ts.discount == 0)
        return self._obs(ts), reward, terminal, bool(ts.last() and not terminal), {}

    def render(self):
        """The camera of the image observation, rendered whether or not `image` is on."""
        return self._env.physics.render(*self.size, camera_id=self.camera)

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


def import_suite(env_id: str, renders: bool):
    """dm_control.suite, its renderer loaded as MUJOCO_GL says (egl unless set, as the
    reference). dm_control opens the renderer when it is imported, so with egl a machine
    without an EGL library or display (a TPU VM, a bare container) fails before any step.
    An env that renders nothing (`renders` False: no image) then goes on with
    dm_control's no-renderer setting, MUJOCO_GL=disable, where MUJOCO_GL was not set; with
    images, or with MUJOCO_GL set, it raises naming MUJOCO_GL."""
    import dm_control  # noqa: F401 - a missing package is not a renderer's failure

    chosen = "MUJOCO_GL" in os.environ
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import dm_control._render  # noqa: F401 - reads MUJOCO_GL once per process
    except ImportError as e:
        if chosen or renders:
            raise ImportError(
                f"--env {env_id}: dm_control cannot load its renderer with MUJOCO_GL="
                f"{os.environ['MUJOCO_GL']} ({e}); set MUJOCO_GL=osmesa, or "
                "MUJOCO_GL=disable with env.dmc.image false") from e
        os.environ["MUJOCO_GL"] = "disable"
        import dm_control._render  # noqa: F401, F811 - imported afresh: the failed one left
    from dm_control import suite
    return suite


def repeat_step(env, action, bounds: tuple, repeat: int, env_id: str) -> tuple:
    """A dm_control env stepped `repeat` times with one action, mapped from [-1, 1] onto
    bounds (low [D], high [D], the action spec's shape): (the last TimeStep, the rewards'
    sum as float32). The sum is float64 over float32 step rewards (see the module
    docstring). ValueError naming env_id for a non-finite action."""
    low, high, shape = bounds
    a = normalized_action(np.ravel(action), low, high)
    if not np.isfinite(a).all():
        raise ValueError(f"{env_id}: non-finite action {a}")
    a = a.reshape(shape)
    reward = 0.0
    for _ in range(repeat):
        ts = env.step(a)
        reward += float(np.float32(ts.reward or 0.0))
        if ts.last():
            break
    return ts, float(np.float32(reward))


make = DMCEnv  # the registry's constructor: make(task, env_id=..., **settings)
