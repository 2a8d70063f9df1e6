"""Does it matter that Gymnasium's CartPole-v1 computes in float64 and gymnax's in float32?

Both packages step the same Euler equations with the same constants; the agent sees
float32 observations from both (Gymnasium casts its float64 state). This plays the two
real packages side by side from the same start states (Gymnasium's reset distribution)
with the same actions, and prints one JSON object:

- open_loop: a fixed random action sequence for 500 steps (termination ignored): the
  largest absolute difference of the observation after 10, 100, 200 and 500 steps;
- closed_loop: a deterministic balancing controller (pushes toward the pole's fall), so
  a difference can change an action: the first step at which the two runs' actions
  differ (none when they never do) and both episode lengths (500 = the time limit).

    .venv/bin/python benchmarks/experiments/cartpole_float64.py --starts 100
"""

from __future__ import annotations

import argparse
import json
import warnings

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments.classic_control import cartpole

LIMIT = 500


def controller(obs: np.ndarray) -> int:
    """Push right when the pole falls right (angle and angular velocity), else left."""
    x, x_dot, theta, theta_dot = (float(v) for v in obs)
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)


def _gymnax():
    env = cartpole.CartPole()
    params = env.default_params

    @jax.jit
    def step(state, action):
        obs, state, _, done, _ = env.step_env(jax.random.PRNGKey(0), state, action, params)
        return obs, state, done

    def start(s):
        x, x_dot, theta, theta_dot = (jnp.float32(v) for v in s)
        return cartpole.EnvState(time=0, x=x, x_dot=x_dot, theta=theta, theta_dot=theta_dot)

    return start, step


def _gym(s):
    warnings.filterwarnings("ignore", message=".*already returned terminated")  # open loop
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    env.state = np.asarray(s, np.float64)
    return env


def open_loop(starts, rng) -> dict:
    start, step = _gymnax()
    marks = (10, 100, 200, LIMIT)
    diff = {m: 0.0 for m in marks}
    for s in starts:
        actions = rng.integers(0, 2, LIMIT)
        g64, g32 = _gym(s), start(s)
        for t, a in enumerate(actions, 1):
            o64 = g64.step(int(a))[0]
            o32, g32, _ = step(g32, jnp.int32(a))
            if t in diff:
                diff[t] = max(diff[t], float(np.abs(np.asarray(o32) - o64).max()))
    return {f"max_abs_obs_diff_after_{m}": diff[m] for m in marks}


def closed_loop(starts) -> dict:
    start, step = _gymnax()
    first_diff, lengths64, lengths32 = [], [], []
    for s in starts:
        g64, g32 = _gym(s), start(s)
        o64 = o32 = np.asarray(s, np.float32)
        done64 = done32 = False
        n64 = n32 = 0
        first = None
        for t in range(LIMIT):
            a64, a32 = controller(o64), controller(o32)
            if first is None and not (done64 or done32) and a64 != a32:
                first = t
            if not done64:
                o64, _, done64, _, _ = g64.step(a64)
                n64 += 1
            if not done32:
                o32, g32, d = step(g32, jnp.int32(a32))
                o32, done32 = np.asarray(o32), bool(d)
                n32 += 1
            if done64 and done32:
                break
        first_diff.append(first)
        lengths64.append(n64)
        lengths32.append(n32)
    differ = [f for f in first_diff if f is not None]
    return {"starts": len(starts), "runs_whose_actions_ever_differ": len(differ),
            "first_differing_step": sorted(differ),
            "length_float64_mean": float(np.mean(lengths64)),
            "length_float32_mean": float(np.mean(lengths32)),
            "lengths_equal": int(sum(a == b for a, b in zip(lengths64, lengths32, strict=True)))}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--starts", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    starts = rng.uniform(-0.05, 0.05, (a.starts, 4))  # Gymnasium's reset distribution
    print(json.dumps({"open_loop": open_loop(starts, rng), "closed_loop": closed_loop(starts),
                      "gymnasium": gymnasium.__version__}))


if __name__ == "__main__":
    main()
