"""Rows per second of each compiled suite's collector step (envs.collector_step), jitted,
vmapped over --num-envs envs, uniform random actions, scanned over --ticks ticks per call.

Prints one JSON object per env (env, num_envs, compile_s, rows_per_s:
the median of --repeats timed calls, reset_tick_frac: the share of ticks on which some
env reset) and a final {"table": [...]} line. Suites that are not installed
are reported as skipped. Environment only: no policy, no replay (`dreamerjax bench`
times the whole tick).

    nice .venv/bin/python benchmarks/experiments/envs_rows.py
    nice .venv/bin/python benchmarks/experiments/envs_rows.py --envs brax_ant:backend=positional
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax

from dreamerjax import envs

DEFAULT_ENVS = (
    "gymnax_CartPole-v1",
    "gymnax_Breakout-MinAtar",
    "craftax_Craftax-Classic-Symbolic-v1",
    "craftax_Craftax-Classic-Pixels-v1",
    "craftax_Craftax-Symbolic-v1",
    "playground_CartpoleBalance",
    "playground_WalkerWalk",
    "playground_CheetahRun",
    "brax_ant",
)


def parse(item: str) -> tuple[str, dict]:
    """`ENV_ID[:key=value,...]` -> (env id, suite options)."""
    env_id, _, rest = item.partition(":")
    opts = {}
    for kv in filter(None, rest.split(",")):
        k, v = kv.split("=", 1)
        opts[k] = int(v) if v.isdigit() else v
    return env_id, opts


def random_action(spec, key):
    if spec.discrete:
        return jax.random.randint(key, (), 0, spec.num_actions)
    return jax.random.uniform(key, spec.action_shape, minval=-1.0, maxval=1.0)


def measure(env_id: str, opts: dict, num_envs: int, ticks: int, repeats: int) -> dict:
    spec = envs.make_env(env_id, dict_obs=True, **opts)
    # collector_step vmapped, as training steps its envs: every tick computes every reset
    step = jax.vmap(lambda s, a, kk: envs.collector_step(spec, s, a, kk))

    @jax.jit
    def run(state, key):
        def tick(state, k):
            k_act, k_env = jax.random.split(k)
            acts = jax.vmap(lambda kk: random_action(spec, kk))(jax.random.split(k_act, num_envs))
            state, row, _ = step(state, acts, jax.random.split(k_env, num_envs))
            return state, (row["reward"].sum(), row["is_first"].any())
        state, (rewards, resets) = jax.lax.scan(tick, state, jax.random.split(key, ticks))
        return state, (rewards.sum(), resets.sum())

    init = jax.jit(jax.vmap(lambda k: envs.collector_init(spec, k)))
    key = jax.random.PRNGKey(0)
    t0 = time.perf_counter()
    state, _ = init(jax.random.split(key, num_envs))
    for _ in range(2):  # the second call sees run's own output types (no recompile later)
        state, (total, _) = run(state, key)
        jax.block_until_ready(total)
    compile_s = time.perf_counter() - t0
    times, reset_ticks = [], 0
    for i in range(repeats):
        t0 = time.perf_counter()
        state, (total, resets) = run(state, jax.random.fold_in(key, i + 1))
        jax.block_until_ready(total)
        times.append(time.perf_counter() - t0)
        reset_ticks += int(resets)
    return dict(env=env_id, options=opts, num_envs=num_envs, ticks=ticks,
                reset_tick_frac=round(reset_ticks / (ticks * repeats), 3),
                compile_s=round(compile_s, 1),
                rows_per_s=round(num_envs * ticks / statistics.median(times), 1),
                obs_space=[list(e[:1]) + [list(e[1]), e[2]] for e in spec.obs_space])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="*", default=list(DEFAULT_ENVS),
                   help="ENV_ID[:key=value,...] (suite options, e.g. brax_ant:backend=mjx)")
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--ticks", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    table = []
    for item in args.envs:
        env_id, opts = parse(item)
        suite, _ = envs.parse_env_id(env_id)
        if not suite.installed():
            out = dict(env=env_id, skipped=f"not installed: {suite.install}")
            print(json.dumps(out), flush=True)
            table.append(out)
            continue
        out = measure(env_id, opts, args.num_envs, args.ticks, args.repeats)
        print(json.dumps(out), flush=True)
        table.append(out)
    print(json.dumps(dict(table=table, jax=jax.__version__, backend=jax.default_backend(),
                          devices=str(jax.devices()))))


if __name__ == "__main__":
    main()
