"""Driver for the reference (danijar/dreamerv3 at 29eb964): its own jitted train step
(`JAXAgent._train`, dreamerv3/jaxagent.py:345-346) on one fixed batch.

Run by run.py in the reference's virtual environment as
`python driver_reference.py CHECKOUT`; the checkout's `dreamerv3` and `embodied` are
imported from CHECKOUT at run time and nothing of it is copied. The agent is built with the
protocol's configuration (docs/protocol.md, section 3: the reference defaults plus the
overrides listed there; batch 16 x 65 = 64 trained rows + replay_context 1, float32) on
CartPole's spaces (vector float32[4], a discrete action of 2).

Compile time: `JAXAgent.__init__` lowers and compiles train and report
(jaxagent.py:85-88); a subclass times `_lower_train` (trace + lower, including the
`init_train` call it makes) and the train step's `.compile()`, and skips the report
program, which the train step does not use. No persistent compilation cache is configured
(jax 0.4.26 has none by default), so every compile is cold.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _serve  # noqa: E402

# The protocol's overrides of the reference defaults (docs/protocol.md, section 3).
OVERRIDES = {
    "seed": 0, "task": "gymnax_cartpole",
    "jax.platform": "cpu", "jax.compute_dtype": "float32", "jax.param_dtype": "float32",
    "jax.prealloc": False, "jax.transfer_guard": False,
    "dyn.rssm.deter": 512, "dyn.rssm.hidden": 64, "dyn.rssm.classes": 4,
    r".*\.units": 64, "run.train_ratio": 512.0, "run.num_envs": 16,
    "run.driver_parallel": False,
    "run.log_every": -1, "run.eval_every": -1, "run.save_every": -1,
}


class _Skip:
    """Stands in for the report program so JAXAgent.__init__ does not compile it."""

    def compile(self):
        return None


def build(checkout: str):
    sys.path.insert(0, checkout)
    import embodied
    import jax
    import numpy as np
    from dreamerv3 import agent as agt

    config = embodied.Config(agt.Agent.configs["defaults"])
    config = config.update({**OVERRIDES, "logdir": tempfile.mkdtemp(prefix="ref-bench-")})
    config = config.update(  # as dreamerv3/main.py:35-38 derives them
        replay_length=config.replay_length or config.batch_length,
        replay_length_eval=config.replay_length_eval or config.batch_length_eval)
    obs_space = {
        "vector": embodied.Space(np.float32, (4,)),
        "reward": embodied.Space(np.float32),
        "is_first": embodied.Space(bool),
        "is_last": embodied.Space(bool),
        "is_terminal": embodied.Space(bool),
    }
    act_space = {"action": embodied.Space(np.int32, (), 0, 2),
                 "reset": embodied.Space(bool)}

    times = {}

    class Timed(agt.Agent):
        def _lower_train(self):
            t = time.perf_counter()
            super()._lower_train()
            times["trace_lower"] = time.perf_counter() - t
            lowered = self._train

            class Compile:
                def compile(self_inner):
                    t = time.perf_counter()
                    out = lowered.compile()
                    times["compile"] = time.perf_counter() - t
                    return out
            self._train = Compile()

        def _lower_report(self):
            self._report = _Skip()

    t0 = time.perf_counter()
    agent = Timed(obs_space, act_space, config)
    build_s = time.perf_counter() - t0

    B, T = config.batch_size, config.batch_length
    batch = fixed_batch(agent, B, T, config.dyn.rssm.deter, config.dyn.rssm.stoch,
                        config.dyn.rssm.classes)
    data = jax.device_put(batch, agent.train_sharded)
    state = {"params": agent.params, "carry": agent.init_train(B), "mets": None}

    def step():
        params = state["params"]
        allo = {k: v for k, v in params.items() if k in agent.policy_keys}
        dona = {k: v for k, v in params.items() if k not in agent.policy_keys}
        seed = agent._next_seeds(agent.train_sharded)
        out = agent._train(allo, dona, data, state["carry"], seed)
        params, _, carry, mets = jax.block_until_ready(out)
        state.update(params=params, carry=carry, mets=mets)

    def check():
        mets = state["mets"] or {}
        losses = {k: float(np.asarray(v).reshape(-1)[0]) for k, v in mets.items()
                  if k.endswith("_loss")}
        bad = sorted(k for k, v in losses.items() if not np.isfinite(v))
        # Statistics such as constats/neg_loss (a mean over the batch's terminal rows)
        # are NaN for a batch without such rows; the losses themselves have no "/".
        return {"finite": not [k for k in bad if "/" not in k], "losses": len(losses),
                "nonfinite": bad}

    info = {
        "program": "reference", "jax": jax.__version__,
        "jaxlib": __import__("jaxlib").__version__, "numpy": np.__version__,
        "batch": [B, T], "compute_dtype": config.jax.compute_dtype,
        # The optimised variables (the count the reference's optimiser prints).
        "params": int(sum(np.prod(v.shape) for k, v in agent.params.items()
                          if re.match(r"agent/(enc|dyn|dec|rew|con|actor|critic)/", k))),
        "trace_lower_s": times["trace_lower"], "compile_s": times["compile"],
        "compile_cold_s": times["trace_lower"] + times["compile"],
        "build_s": build_s,
        "what": "JAXAgent._train(alloc, donated, data, carry, seed) of 29eb964, "
                "one fixed batch, params and carry fed back",
    }
    return step, info, check


def fixed_batch(agent, B: int, T: int, deter: int, stoch: int, classes: int) -> dict:
    """One batch of every key the train step reads (agent.keys), drawn once from a fixed
    generator: plausible CartPole rows (observations ~ N(0, 0.1), reward 1, an episode
    start in about 1 row of 50, the row before it the terminal end of the previous
    episode) and replay-context latents."""
    import numpy as np
    rng = np.random.default_rng(0)
    first = rng.random((B, T)) < 0.02
    last = np.roll(first, -1, axis=1)
    last[:, -1] = False
    values = {
        "vector": rng.normal(0, 0.1, (B, T, 4)).astype(np.float32),
        "reward": np.where(first, 0, 1).astype(np.float32),
        "is_first": first,
        "is_last": last,
        "is_terminal": last,
        "action": rng.integers(0, 2, (B, T)).astype(np.int32),
        "stepid": rng.integers(0, 256, (B, T, 20)).astype(np.uint8),
        "deter": rng.normal(0, 0.5, (B, T, deter)).astype(np.float32),
        "stoch": rng.integers(0, classes, (B, T, stoch)).astype(np.int32),
    }
    missing = sorted(set(agent.keys) - set(values))
    if missing:
        raise KeyError(f"the reference's train step reads keys this driver does not make: "
                       f"{missing}")
    return {k: values[k] for k in agent.keys}


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: driver_reference.py CHECKOUT")
    _serve.claim_stdout()
    step, info, check = build(os.path.abspath(sys.argv[1]))
    _serve.serve(step, info, check)


if __name__ == "__main__":
    main()
