"""What the evaluation's early stop saves: wall time of `acting.evaluate` (a while loop that
stops on the tick where the last episode ends) against the same loop playing every tick
of the env's episode limit (`stop_early=False`, the form it replaced), with the same
untrained params, keys and episodes.

Prints one JSON object per env (env, episode_limit, episodes, seeds, ticks_while: the
ticks the early-stopping loop plays per seed, its longest episode; wall_while_s /
wall_scan_s: the median of --repeats timed calls after a compile, compile_while_s /
compile_scan_s, returns_equal) and nothing else.

    nice .venv/bin/python benchmarks/eval_ticks.py
    nice .venv/bin/python benchmarks/eval_ticks.py --envs craftax_Craftax-Classic-Symbolic-v1 --tiny
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.resolve import make_config
from dreamerjax.run import acting
from dreamerjax.run import setup as setup_lib


def _timed(fn, args, repeats: int):
    """(compile + first call s, median s of the further calls, last outputs)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - t0)
    return first, statistics.median(walls), out


def measure(env_id: str, tiny: bool, seeds: int, episodes: int, repeats: int) -> dict:
    setup = setup_lib.make_setup(make_config(env_id, tiny=tiny))
    keys = jnp.stack([jax.random.PRNGKey(s) for s in range(seeds)])
    params = jax.vmap(lambda k: agent_lib.init(k, setup.config.agent, setup.spaces).params)(
        keys)
    eval_keys = jax.vmap(lambda k: jax.random.fold_in(k, 10**6))(keys)
    new = jax.jit(jax.vmap(lambda p, k: acting.evaluate(setup, p, k, episodes)))
    old = jax.jit(jax.vmap(lambda p, k: acting.evaluate(setup, p, k, episodes,
                                                      stop_early=False)))
    c_new, w_new, (ret, length) = _timed(new, (params, eval_keys), repeats)
    c_old, w_old, (ret_old, length_old) = _timed(old, (params, eval_keys), repeats)
    return {
        "env": env_id, "tiny": tiny, "episode_limit": int(setup.spec.episode_limit),
        "episodes": episodes, "seeds": seeds,
        "ticks_while": np.asarray(length).max(axis=1).astype(int).tolist(),
        "episode_length_mean": float(np.asarray(length).mean()),
        "wall_while_s": round(w_new, 4), "wall_scan_s": round(w_old, 4),
        "speedup": round(w_old / w_new, 2),
        "compile_while_s": round(c_new - w_new, 2), "compile_scan_s": round(c_old - w_old, 2),
        "returns_equal": bool(np.array_equal(np.asarray(ret), np.asarray(ret_old))
                              and np.array_equal(np.asarray(length), np.asarray(length_old))),
        "backend": jax.default_backend(),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["craftax_Craftax-Classic-Symbolic-v1"])
    p.add_argument("--tiny", action="store_true", help="the tiny network (default: 1m)")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    for env_id in a.envs:
        print(json.dumps(measure(env_id, a.tiny, a.seeds, a.episodes, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
