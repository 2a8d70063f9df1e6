"""Your own Gymnasium environment, stepped on the host beside the compiled updates.

    python examples/host_env.py --out runs/corridor_host
    python examples/host_env.py --out runs/quick --small    # a seconds-long smoke run

Any Gymnasium env with Box or Discrete spaces (Dict observations too) works the same way:
register a class or factory with `dreamerjax.register_env`, then train on the returned id
(registering it again replaces it). From the command line, put the class
and a `gymnasium.register(...)` call in a module `my_pkg` and pass
`--env gym_my_pkg:Corridor-v0` (Gymnasium imports `my_pkg` first).
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import dreamerjax

GOAL = 10


class Corridor(gym.Env):
    """Walk right to the goal at GOAL; reward 1 on reaching it."""

    observation_space = gym.spaces.Box(0, GOAL, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.x = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.x = max(0, self.x + (1 if action else -1))
        done = self.x == GOAL
        return np.array([self.x], np.float32), float(done), done, False, {}


# The settings of the tests' small run (tests/_runs.py): the tiny network, 8 envs,
# batches of 4 x 16 rows; only checks that everything runs.
SMALL = dict(steps=160, num_envs=8, eval_every=80, eval_episodes=2, batch_size=4,
             batch_length=16, train_ratio=32, replay_capacity=64)


def main(out: str, small: bool = False) -> None:
    env_id = dreamerjax.register_env("Corridor-v0", Corridor, max_episode_steps=100)
    settings = SMALL if small else dict(steps=1200, eval_every=400)
    config = dreamerjax.make_config(env_id, tiny=True, **settings)  # env_id: "gym_Corridor-v0"
    dreamerjax.train(config, seeds=(0, 1), out=out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/corridor_host")
    parser.add_argument("--small", action="store_true", help="the tests' small run")
    args = parser.parse_args()
    main(args.out, args.small)
    print(f"records in {args.out}/records.jsonl; see them with: dreamerjax summary {args.out}")
