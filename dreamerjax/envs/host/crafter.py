"""Crafter as host envs (`--env crafter_reward`, `crafter_noreward`).

The semantics of the reference's Crafter env (embodied/envs/crafter.py at 29eb964),
settings configs.yaml:80: a [size..., 3] uint8 `image` (64x64), 17 discrete actions,
`reward` the game's reward for `crafter_reward` and 0 for `crafter_noreward`, is_terminal
where Crafter's discount is 0 (the player died), its 10,000-step limit a time-limit end.

Per-episode extras, as the reference's crafter preset logs them (configs.yaml:220-226:
log_keys_max '^log_achievement_.*', log_keys_sum '^log_reward$', aggregated over the
episode by embodied/run/train.py:48-54): `log_achievement_NAME`, the episode's maximum of
Crafter's cumulative unlock count of NAME, that is its final count; `log_reward`, the sum
of the game's reward (also for noreward). They reach the episode end's `stats`
through info["episode_log"] (episodes.jsonl), not the agent's observations
(the reference drops `log_` keys from its inputs, dreamerv3/agent.py:32).
"""

from __future__ import annotations

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space


class CrafterEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, size=(64, 64)):
        import crafter
        env_id = env_id or f"crafter_{task}"
        if task not in ("reward", "noreward"):
            raise ValueError(f"--env {env_id}: Crafter tasks are reward and noreward")
        self._crafter = crafter
        self.size = tuple(int(s) for s in size)
        self._reward = task == "reward"
        self._env = self._make(None)
        self.achievements = tuple(crafter.constants.achievements)
        self._log_reward = 0.0
        self._maxima = {k: 0 for k in self.achievements}
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, (("image", (*self.size, 3), "uint8"),)),
            discrete=True, num_actions=int(self._env.action_space.n), action_dims=0,
            episode_limit=int(self._env._length or 0),
            episode_keys=(("log_reward", "float32"),
                          *((f"log_achievement_{k}", "int32") for k in self.achievements)))

    def _make(self, seed: int | None):
        # Crafter seeds its worlds at construction (each reset draws from that seed).
        return self._crafter.Env(size=self.size, reward=self._reward, seed=seed)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._env = self._make(int(seed))
        self._log_reward = 0.0
        self._maxima = {k: 0 for k in self.achievements}
        return {"image": np.asarray(self._env.reset(), np.uint8)}

    def step(self, action):
        image, reward, done, info = self._env.step(int(action))
        self._log_reward += float(info["reward"])
        for k in self.achievements:
            self._maxima[k] = max(self._maxima[k], int(info["achievements"][k]))
        terminal = bool(info["discount"] == 0)
        out = {"episode_log": {"log_reward": self._log_reward,
                               **{f"log_achievement_{k}": v for k, v in self._maxima.items()}}}
        return ({"image": np.asarray(image, np.uint8)}, float(reward), terminal,
                bool(done) and not terminal, out)


make = CrafterEnv  # the registry's constructor: make(task, env_id=..., **settings)
