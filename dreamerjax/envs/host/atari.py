"""Atari 2600 games through ale-py as host envs (`--env atari_pong`, `atari100k_pong`).

The semantics of the reference's Atari env (embodied/envs/atari.py at 29eb964), with the
settings of configs.yaml:79/81 (host.SUITE_DEFAULTS):

- one agent step repeats the action for `repeat` emulator frames, summing their rewards;
  the last `pooling` frames are rendered and max-pooled (or averaged) (atari.py:97-123);
- sticky actions: ALE's own repeat_action_probability, 0.25 whatever `sticky` says, as
  the reference: it sets the probability after loading the ROM (atari.py:51-59), and ALE
  reads it only when a ROM loads (the StellaEnvironment constructor, ALE's
  src/ale/environment/stella_environment.cpp), so its `sticky=False` (the atari100k
  preset) leaves ALE's default 0.25 acting. `sticky_literal=True` (ours) sets it before
  the ROM loads: 0.25 when `sticky`, none otherwise (docs/environments.md);
- `noops`: a uniform number of NOOP frames in [0, noops] after each reset (atari.py:128);
  `autostart` presses FIRE then UP after it (atari.py:133-141);
- `lives`: "unused" or "reset" (a lost life ends the episode as a termination);
- `actions`: "all" (ALE's 18 legal actions) or "needed" (the game's minimal set);
- `length`: an episode limit in emulator frames (a time-limit end);
- the pooled RGB frame is resized with pillow's bilinear filter to `size` [H, W], then
  turned gray with the weights (0.299, 0.587, 0.114), truncated to uint8 (atari.py:151-167).

Where we differ (docs/deviations.md): on reset every pooling buffer is filled with the
reset frame (the reference at 29eb964 copies the older buffers onto the new frame,
atari.py:143-145, fixed later upstream in "Fix Atari frame maxpooling on reset"); and
is_terminal is set only on game over or a lost life with lives="reset" (the reference
returns is_terminal=is_last, atari.py:173, so its time-limit ends count as terminations).
lives="discount" (is_terminal without is_last) is refused: the rows cannot carry it, and
the reference drops it through the same line.
"""

from __future__ import annotations

import os
from collections import deque

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space

GRAY_WEIGHTS = np.array([0.299, 0.587, 1 - (0.299 + 0.587)])


class AtariEnv(HostEnv):
    def __init__(self, name: str, env_id: str | None = None, repeat: int = 4,
                 size=(64, 64), gray: bool = True, noops: int = 0, lives: str = "unused",
                 sticky: bool = True, actions: str = "all", length: int = 108000,
                 pooling: int = 2, aggregate: str = "max", resize: str = "pillow",
                 autostart: bool = False, clip_reward: bool = False,
                 sticky_literal: bool = False):
        import ale_py
        env_id = env_id or f"atari_{name}"
        checks = {"lives": (lives, ("unused", "reset")), "actions": (actions, ("all", "needed")),
                  "aggregate": (aggregate, ("max", "mean")),
                  "resize": (resize, ("pillow", "opencv"))}
        for key, (value, allowed) in checks.items():
            if value not in allowed:
                extra = (" (discount: is_terminal without is_last, which the rows do not "
                         "carry)" if key == "lives" and value == "discount" else "")
                raise ValueError(f"env.atari.{key}={value!r}: choose one of "
                                 f"{', '.join(allowed)}{extra}")
        if repeat < 1 or pooling < 1 or noops < 0 or length < 0:
            raise ValueError(f"{env_id}: repeat and pooling must be >= 1, noops and length "
                             f">= 0 (got {repeat}, {pooling}, {noops}, {length})")
        if name == "james_bond":  # atari.py:31-32
            name = "jamesbond"
        self.name = name
        self.repeat, self.size, self.gray = int(repeat), tuple(int(s) for s in size), gray
        self.noops, self.lives, self.sticky = int(noops), lives, bool(sticky)
        self.sticky_literal = bool(sticky_literal)
        self.length, self.pooling, self.aggregate = int(length), int(pooling), aggregate
        self.resize, self.autostart, self.clip_reward = resize, autostart, clip_reward
        self._ale_py = ale_py
        path = os.environ.get("ALE_ROM_PATH")
        if path:
            self._rom = os.path.join(path, f"{name}.bin")
        else:
            import warnings

            from ale_py import roms
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._rom = roms.get_rom_path(name)
            if self._rom is None:
                known = ", ".join(sorted(roms.get_all_rom_ids()))
                raise ValueError(f"--env {env_id}: ale-py has no ROM {name!r} ({known})")
        self._load(None)
        self.actionset = list(self.ale.getLegalActionSet() if actions == "all"
                              else self.ale.getMinimalActionSet())
        h, w = self.ale.getScreenDims()
        self.buffers = deque([np.zeros((h, w, 3), np.uint8) for _ in range(self.pooling)],
                             maxlen=self.pooling)
        self.prevlives = 0
        self.duration = 0
        channels = 1 if gray else 3
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, (("image", (*self.size, channels), "uint8"),)),
            discrete=True, num_actions=len(self.actionset), action_dims=0,
            episode_limit=-(-self.length // self.repeat) if self.length else 0)

    def _load(self, seed: int | None) -> None:
        """A fresh ALE with the reset noise and ALE seeded from `seed` (ALE reads its seed
        and repeat_action_probability when the ROM loads).

        Fresh, not the same interface loaded again, as each of the reference's envs has
        its own (atari.py:48-59): a loadROM reads every setting made on its interface
        before, so nothing of an earlier load may carry over.
        """
        ale_py = self._ale_py
        self.rng = np.random.default_rng(seed)
        self.ale = ale_py.ALEInterface()
        self.ale.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale.setInt("random_seed", int(self.rng.integers(0, 2 ** 31)))
        if self.sticky_literal:
            self.ale.setFloat("repeat_action_probability", 0.25 if self.sticky else 0.0)
        # Otherwise ALE's default acts: the reference's setFloat after loadROM changes
        # nothing that ALE reads.
        self.ale.loadROM(self._rom)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._load(seed)
        act = self._ale_py.Action
        self.ale.reset_game()
        for _ in range(int(self.rng.integers(self.noops + 1))):
            self.ale.act(act.NOOP)
            if self.ale.game_over():
                self.ale.reset_game()
        if self.autostart and act.FIRE in self.actionset:
            for a in (act.FIRE, act.UP):
                self.ale.act(a)
                if self.ale.game_over():
                    self.ale.reset_game()
        self._render()
        for buf in list(self.buffers)[1:]:
            np.copyto(buf, self.buffers[0])
        self.prevlives = self.ale.lives()
        self.duration = 0
        return {"image": self._image()}

    def step(self, action):
        index = int(action)
        if not 0 <= index < len(self.actionset):
            raise ValueError(f"{self.spec.env_id}: action {index} outside "
                             f"[0, {len(self.actionset)})")
        a = self.actionset[index]
        reward, terminal, last = 0.0, False, False
        for k in range(self.repeat):
            reward += self.ale.act(a)
            self.duration += 1
            if k >= self.repeat - self.pooling:
                self._render()
            if self.ale.game_over():
                terminal = last = True
            if self.length and self.duration >= self.length:
                last = True
            lives = self.ale.lives()
            if self.lives == "reset" and 0 < lives < self.prevlives:
                terminal = last = True
            self.prevlives = lives
            if last:
                break
        if self.clip_reward:
            reward = float(np.sign(reward))
        return {"image": self._image()}, float(reward), terminal, last and not terminal, {}

    def _render(self) -> None:
        """Rotate the buffers and grab the screen into the newest (atari.py:147-149)."""
        self.buffers.appendleft(self.buffers.pop())
        self.ale.getScreenRGB(self.buffers[0])

    def _image(self) -> np.ndarray:
        if self.aggregate == "max":
            image = np.amax(np.stack(self.buffers), 0)
        else:
            image = np.mean(np.stack(self.buffers), 0).astype(np.uint8)
        h, w = self.size
        if self.resize == "pillow":
            from PIL import Image
            image = np.array(Image.fromarray(image).resize((w, h), Image.BILINEAR))
        else:
            import cv2
            image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
        if self.gray:
            image = (image * GRAY_WEIGHTS).sum(-1).astype(np.uint8)[:, :, None]
        return image


make = AtariEnv  # the registry's constructor: make(task, env_id=..., **settings)
