"""Does the physics port change cartpole_swingup? dm_control's MuJoCo against Playground's MJX.

dreamerjax's DeepMind Control curves on an accelerator use MuJoCo Playground's port of the
task (`playground_CartpoleSwingup`: MJX, float32, Euler), while the reference's published
curves come from dm_control's own (`dmc_cartpole_swingup`: MuJoCo in C, float64, RK4).
The model, reward, reset and observation are the same (benchmarks/gpu_check.py,
PLAYGROUND_NOTE). This check measures what the integrators change, with no learning in
the way, from the same start states (dm_control's reset, copied into MJX):

- `open_loop`: the same uniform random actions (each held for 2 control steps, the
  preset's action repeat) in both: the control step at which the pole angles first differ
  by more than 0.1 rad, and each episode's return in both (the reward depends on the
  state, so the returns part when the states do).
- `controller`: fixed feedback controllers (energy pumping to swing up, a linear state
  feedback near upright; every gain set of a small grid) run closed loop in each
  simulator from the same starts: policies that act on the state they see, as the agent's
  does. For each gain set the mean return in both; the best gain set of each simulator
  and how it does in the other (a controller tuned to one physics, played in the other).
  Equal returns mean a good policy scores the same under both physics; a gap bounds how
  much of a learning-curve gap the port could explain. A third arm, dm_control's MuJoCo
  (float64) with the port's integrator and solver options (PLAYGROUND_OPTIONS), tells the
  options' part from the rest (MJX, float32).

    python benchmarks/cartpole_physics.py --episodes 20 --out FILE.json

needs dm_control, mujoco and playground (`pip install -e '.[dmc,playground]'`); prints
one JSON object (and writes it to --out).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time

import numpy as np

ACTION_REPEAT = 2      # dmc_proprio's env.dmc.repeat
DIVERGED_RAD = 0.1     # pole angles this far apart count as parted
# The controller's gains (control's docstring); k < 0 pumps the wrong way, so only k > 0.
GRID = {"a": (5.0, 10.0), "b": (1.0, 2.0), "k": (2.0,), "switch": (0.8, 0.9),
        "cd": ((0.5, 1.0), (1.0, 1.5), (0.2, 0.5))}
GAIN_NAMES = ("a", "b", "c", "d", "k", "switch")


def _wrap(angle):
    """Angle in (-pi, pi], 0 upright (the hinge's 0)."""
    return (angle + np.pi) % (2 * np.pi) - np.pi


def control(xp, qpos, qvel, gains):
    """The controller's force in [-1, 1] from the state; xp is numpy or jax.numpy.

    Far from upright it pumps the pole's energy toward the upright's (E = 0 there) while
    pulling the cart home; near upright (cos > switch) it is a linear state feedback.
    """
    x, theta = qpos[0], (qpos[1] + np.pi) % (2 * np.pi) - np.pi
    xdot, thetadot = qvel[0], qvel[1]
    cos = xp.cos(theta)
    near = gains["a"] * theta + gains["b"] * thetadot + gains["c"] * x + gains["d"] * xdot
    energy = 0.5 * 0.33 * thetadot ** 2 + 9.81 * 0.5 * (cos - 1)
    far = gains["k"] * energy * xp.sign(thetadot * cos) - 0.3 * x - 0.3 * xdot
    return xp.clip(xp.where(cos > gains["switch"], near, far), -1.0, 1.0)


# Playground's model options for the task (its cartpole.xml and MJX's defaults, read off
# env.mj_model.opt with playground 0.2.0): Euler without its implicit damping (MuJoCo's
# mjDSBL_EULERDAMP bit, 1 << 15), one solver iteration, four line-search iterations.
PLAYGROUND_OPTIONS = {"integrator": 0, "iterations": 1, "ls_iterations": 4,
                      "disable_bits": 1 << 15}


def dm_episode(seed: int, actions=None, gains=None, options=None):
    """One dm_control episode from its seed's reset: (start qpos, qvel, angles [T], return).

    actions [T/ACTION_REPEAT] in [-1, 1] are played open loop; else the controller acts.
    options (PLAYGROUND_OPTIONS) replace the model's integrator and solver settings:
    MuJoCo in float64 with the port's integration scheme.
    """
    from dm_control import suite

    env = suite.load("cartpole", "swingup", task_kwargs={"random": seed})
    if options:
        opt = env.physics.model.opt
        opt.integrator = options["integrator"]
        opt.iterations = options["iterations"]
        opt.ls_iterations = options["ls_iterations"]
        opt.disableflags = opt.disableflags | options["disable_bits"]
    ts = env.reset()
    phys = env.physics
    qpos0, qvel0 = phys.data.qpos.copy(), phys.data.qvel.copy()
    angles, total, i = [], 0.0, 0
    while not ts.last():
        if actions is not None:
            u = float(actions[i])
        else:
            u = float(control(np, phys.data.qpos, phys.data.qvel, gains))
        for _ in range(ACTION_REPEAT):
            ts = env.step([u])
            total += ts.reward
            angles.append(float(phys.data.qpos[1]))
            if ts.last():
                break
        i += 1
    return qpos0, qvel0, np.array(angles), total


def mjx_player(steps: int = 1000):
    """A function (starts, actions, gains) -> (angles [N, steps], returns [N]) that plays
    Playground episodes from the (qpos, qvel) starts, all at once, compiled once.

    actions [N, steps/ACTION_REPEAT] are played open loop; with actions None the
    controller acts with gains, a dict of GAIN_NAMES.
    """
    import jax
    import jax.numpy as jnp
    from mujoco import mjx
    from mujoco_playground import dm_control_suite

    env = dm_control_suite.load("CartpoleSwingup", config_overrides={"impl": "jax"})

    def start(key, qpos, qvel):
        state = env.reset(key)
        data = mjx.forward(env.mjx_model, state.data.replace(qpos=qpos, qvel=qvel))
        return state.replace(data=data)

    def episode(state, acts, gains):
        def agent_step(state, a):
            u = a if acts is not None else control(jnp, state.data.qpos, state.data.qvel,
                                                  dict(zip(GAIN_NAMES, gains, strict=True)))
            rewards, angles = [], []
            for _ in range(ACTION_REPEAT):
                state = env.step(state, jnp.reshape(u, (1,)))
                rewards.append(state.reward)
                angles.append(state.data.qpos[1])
            return state, (jnp.stack(rewards), jnp.stack(angles))

        xs = acts if acts is not None else jnp.zeros(steps // ACTION_REPEAT)
        _, (rewards, angles) = jax.lax.scan(agent_step, state, xs)
        return angles.reshape(-1), rewards.sum()

    open_loop = jax.jit(jax.vmap(lambda s, a: episode(s, a, None)))
    closed_loop = jax.jit(jax.vmap(lambda s, g: episode(s, None, g), in_axes=(0, None)))

    def play(starts, actions=None, gains=None):
        keys = jax.random.split(jax.random.key(0), len(starts))
        qpos = jnp.asarray(np.stack([s[0] for s in starts]), jnp.float32)
        qvel = jnp.asarray(np.stack([s[1] for s in starts]), jnp.float32)
        states = jax.vmap(start)(keys, qpos, qvel)
        if actions is not None:
            angles, returns = open_loop(states, jnp.asarray(actions, jnp.float32))
        else:
            g = jnp.asarray([gains[n] for n in GAIN_NAMES], jnp.float32)
            angles, returns = closed_loop(states, g)
        return np.asarray(angles), np.asarray(returns, np.float64)

    return play


def grid() -> list[dict]:
    """Every gain set of GRID."""
    return [{"a": a, "b": b, "c": c, "d": d, "k": k, "switch": switch}
            for a, b, k, switch, (c, d) in itertools.product(*GRID.values())]


def _stats(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"mean": round(float(v.mean()), 2), "min": round(float(v.min()), 2),
            "max": round(float(v.max()), 2)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20, help="start states (seeds 1..N)")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes: {args.episodes} is not a positive count")
    t0 = time.time()
    seeds = list(range(1, args.episodes + 1))
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (len(seeds), 1000 // ACTION_REPEAT))

    play = mjx_player()
    open_dm = [dm_episode(s, actions=a) for s, a in zip(seeds, actions, strict=True)]
    starts = [(q, v) for q, v, _, _ in open_dm]
    mjx_angles, mjx_returns = play(starts, actions=actions)
    parted = []
    for (_, _, angles, _), other in zip(open_dm, mjx_angles, strict=True):
        apart = np.nonzero(np.abs(_wrap(angles - other)) > DIVERGED_RAD)[0]
        parted.append(int(apart[0]) if len(apart) else None)

    sets = []
    for gains in grid():
        dm = np.asarray([dm_episode(s, gains=gains)[3] for s in seeds])
        euler = np.asarray([dm_episode(s, gains=gains, options=PLAYGROUND_OPTIONS)[3]
                            for s in seeds])
        pg = play(starts, gains=gains)[1]
        sets.append({"gains": gains, "dm_control": round(float(dm.mean()), 2),
                     "dm_control_playground_options": round(float(euler.mean()), 2),
                     "playground": round(float(pg.mean()), 2),
                     "playground_minus_dm_control": round(float((pg - dm).mean()), 2),
                     "difference_standard_error": round(
                         float((pg - dm).std(ddof=1) / np.sqrt(len(seeds))), 2)})
    best_dm = max(sets, key=lambda r: r["dm_control"])
    best_pg = max(sets, key=lambda r: r["playground"])
    differences = [r["playground_minus_dm_control"] for r in sets]
    options_part = [r["dm_control_playground_options"] - r["dm_control"] for r in sets]

    from importlib.metadata import version

    result = {
        "task": "cartpole_swingup", "episodes": len(seeds), "action_repeat": ACTION_REPEAT,
        "playground_options": PLAYGROUND_OPTIONS,
        "versions": {name: version(name) for name in ("dm-control", "mujoco", "mujoco-mjx",
                                                       "playground", "jax")},
        "open_loop": {
            "parted_at_control_step": parted,
            "parted_median": float(np.median([p if p is not None else 1000 for p in parted])),
            "dm_control_return": _stats([r for *_, r in open_dm]),
            "playground_return": _stats(mjx_returns),
        },
        "controller": {
            "gain_sets": len(sets),
            "best_on_dm_control": best_dm, "best_on_playground": best_pg,
            "playground_minus_dm_control_over_sets": _stats(differences),
            "sets_where_playground_is_lower": sum(d < 0 for d in differences),
            "playground_options_minus_dm_control_over_sets": _stats(options_part),
            "sets": sets,
        },
        "seconds": round(time.time() - t0, 1), "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
