"""Driver for Ajax (`ajax-rl` from the package index): its jitted DreamerV3 update.

Run by run.py in Ajax's virtual environment as `python driver_ajax.py`. The timed program is
Ajax's own per-update function `ajax.agents.DreamerV3.train_DreamerV3.update` (sample a
batch of 16 x (64 + 1 context) rows from the replay, popping the online queue first; one
`learner.train_step`; write the posterior latents back), jitted as its training loop runs
it, the state donated, for `DreamerV3(env_id="CartPole-v1", model_size="1m")` with every
other argument at its default (the protocol's configuration, docs/protocol.md,
section 1). This is the same scope as dreamerjax's bench program (sample + update +
write-back). The replay is first filled by 100 ticks of Ajax's own `collect` (1,600 rows,
past the 1,040-row gate), in a ring of 1,250 rows per env as a 20,000-row run sizes it.

Ajax turns on a persistent compilation cache when imported; run.py sets
`AJAX_NO_COMPILE_CACHE=1`, so the compile measured here is cold.
"""

from __future__ import annotations

import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _serve  # noqa: E402

TICKS = 100
ROWS = 20_000  # the protocol run's length, which sizes the ring (C = ROWS / envs)


def build():
    import jax
    import jax.numpy as jnp
    import numpy as np
    from ajax.agents.DreamerV3 import learner as ln
    from ajax.agents.DreamerV3 import train_DreamerV3 as tr
    from ajax.agents.DreamerV3.DreamerV3 import DreamerV3
    from ajax.agents.DreamerV3.replay import StreamReplay

    agent = DreamerV3(env_id="CartPole-v1", model_size="1m")
    env_args, config, ac = agent.env_args, agent.dreamer_config, agent.agent_config
    spec = tr.env_spec(env_args)
    replay = StreamReplay(n_envs=env_args.n_envs, capacity=agent._ring_rows(ROWS),
                          batch_size=ac.batch_size, batch_length=ac.batch_length)
    keys = tr.train_metric_keys(config, spec, ac.batch_size, ac.batch_length)
    common = {"config": config, "spec": spec, "replay": replay}

    state = jax.jit(lambda k: tr.init_dreamer(k, env_args, config, spec, replay, keys))(
        jax.random.PRNGKey(0))

    def fill(st):
        def tick(s, t):
            return tr.collect(s, t, env_args=env_args, **common)
        return jax.lax.scan(tick, st, jnp.arange(TICKS, dtype=jnp.int32))[0]

    state = jax.block_until_ready(jax.jit(fill, donate_argnums=0)(state))

    program = jax.jit(functools.partial(tr.update, **common), donate_argnums=0)
    tick = jnp.asarray(TICKS - 1, jnp.int32)
    t0 = time.perf_counter()
    traced = program.trace(state, tick)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()

    box = {"state": state}

    def step():
        box["state"] = jax.block_until_ready(compiled(box["state"], tick)[0])

    def check():
        leaves = jax.tree_util.tree_leaves(box["state"].train_metrics)
        finite = all(bool(np.all(np.isfinite(np.asarray(x))))
                     for x in leaves if np.issubdtype(np.asarray(x).dtype, np.floating))
        return {"finite": finite, "updates": int(box["state"].n_updates)}

    import ajax
    info = {
        "program": "ajax", "jax": jax.__version__, "jaxlib": __import__("jaxlib").__version__,
        "numpy": np.__version__,
        "ajax": getattr(ajax, "__version__", None) or _dist_version("ajax-rl"),
        "batch": [ac.batch_size, ac.batch_length + 1],
        "params": int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(
            ln.learner_params(tr.learner_state(box["state"]))))),
        "trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2,
        "compile_cold_s": t3 - t0, "replay_rows_per_env": replay.capacity,
        "what": "jit(train_DreamerV3.update, donate_argnums=0)(state, tick): sample + "
                "train_step + write-back, replay filled by 100 ticks of collect",
    }
    return step, info, check


def _dist_version(name: str):
    from importlib import metadata
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main() -> None:
    _serve.claim_stdout()
    step, info, check = build()
    _serve.serve(step, info, check)


if __name__ == "__main__":
    main()
