"""ProcGen games as host envs (`--env procgen_coinrun`, `procgen_starpilot`, ...).

The semantics of the reference's ProcGen env (embodied/envs/procgen.py at 29eb964 and
e3f0224, the same chain) on procgen's gym registration (procgen/gym_registration.py:
one ProcgenGym3Env with num=1, num_threads=0, its `rgb` observation, gym3's ToGymEnv)
read by FromGym (embodied/envs/from_gym.py):

- `image`: procgen's own 64 x 64 RGB frame when `size` is (64, 64) (procgen.py:11-14,
  the `step` source); any other size renders the 512 x 512 `rgb` of procgen's info
  (render_mode rgb_array) and resizes it with pillow's bilinear filter (or OpenCV's area
  filter for `resize=opencv`) to [H, W] (procgen.py:15-16, 41-60), after every step and
  reset;
- 15 discrete actions (procgen's ac_space);
- procgen resets a level itself when its episode ends: the step that ends it returns
  the observation from before that step (ToGymEnv.step, gym3/interop.py: `if first: ob =
  prev_ob`), and the next reset row is the new level's first frame; with the rendered
  source the ending step already shows the new level's frame (procgen's info is read
  after the step, procgen.py:45-47). Both as the reference's rows;
- is_terminal on every episode end (from_gym.py:67-69: procgen's info has no
  `is_terminal`, so `done` is used), whether the agent died, finished the level or hit
  procgen's own time limit (1,000 steps), which procgen does not tell apart;
- the seed: procgen's `rand_seed` of a fresh ProcgenGym3Env, the levels it draws then
  fixed (the reference passes env kwargs through to gym.make, procgen.py:19-21).

No `log_` keys: the reference emits none for ProcGen.
"""

from __future__ import annotations

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space, import_quietly

# procgen's own frame size: the `step` source of the reference below it is rendered.
NATIVE = (64, 64)
# procgen's games end an episode after at most this many steps (procgen's `timeout`).
TIMEOUT = 1000


def games() -> tuple[str, ...]:
    return tuple(import_quietly("procgen").env.ENV_NAMES)


class ProcgenEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, size=NATIVE,
                 resize: str = "pillow"):
        env_id = env_id or f"procgen_{task}"
        known = games()
        if task not in known:
            raise ValueError(f"--env {env_id}: unknown ProcGen game {task!r}; games: "
                             f"{', '.join(known)}")
        if resize not in ("pillow", "opencv"):
            raise ValueError(f"env.procgen.resize={resize!r}: choose one of pillow, opencv")
        self.task = task
        self.size = tuple(int(s) for s in size)
        self.resize = resize
        self.rendered = self.size != NATIVE  # procgen.py:11-14: 'info' unless 64 x 64
        self._env = self._make(None)
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, (("image", (*self.size, 3), "uint8"),)),
            discrete=True, num_actions=int(self._env.ac_space.eltype.n), action_dims=0,
            episode_limit=TIMEOUT)

    def _make(self, seed: int | None):
        procgen = import_quietly("procgen")
        if seed is not None:
            seed %= 2 ** 31  # procgen's options are int32; a run's env seeds are uint32
        return procgen.ProcgenGym3Env(num=1, num_threads=0, env_name=self.task, rand_seed=seed,
                                      render_mode="rgb_array" if self.rendered else None)

    def _image(self, ob) -> np.ndarray:
        if not self.rendered:
            return np.asarray(ob["rgb"][0], np.uint8)
        frame = np.asarray(self._env.get_info()[0]["rgb"], np.uint8)
        h, w = self.size
        if self.resize == "pillow":
            from PIL import Image
            return np.array(Image.fromarray(frame).resize((w, h), Image.BILINEAR))
        import cv2
        # procgen.py:43-45 hands `size` (H, W) to OpenCV, which reads (W, H): the same for
        # the square sizes of every preset.
        return cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._env = self._make(int(seed))
        # A procgen env is always at the start of a level after construction or an
        # episode's end (it resets itself); ToGymEnv.reset only reads it.
        _, ob, _ = self._env.observe()
        return {"image": self._image(ob)}

    def step(self, action):
        index = int(action)
        if not 0 <= index < self.spec.num_actions:
            raise ValueError(f"{self.spec.env_id}: action {index} outside "
                             f"[0, {self.spec.num_actions})")
        _, prev, _ = self._env.observe()
        self._env.act(np.array([index]))
        reward, ob, first = self._env.observe()
        done = bool(first[0])
        if done:
            ob = prev
        return {"image": self._image(ob)}, float(np.float32(reward[0])), done, False, {}

    def close(self) -> None:
        close = getattr(self._env, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass


make = ProcgenEnv  # the registry's constructor: make(task, env_id=..., **settings)
