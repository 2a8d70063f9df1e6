"""The harness of run_reference.py for the reference at e3f0224 (`--version e3f0224`).

The record set, the options, the evaluation and the resume are harness.py's; what
changes is the reference's API at e3f0224: `elements` configs, counters and checkpoints,
`dreamerv3/main.py`'s `make_replay` / `make_stream` / `wrap_env`, the loop of
embodied/run/train.py (ref_loop_head.py) and the agent of embodied/jax/agent.py. Run it
through run_reference.py in the venv of e3f0224 (jax 0.4.33, elements, portal, ninjax):

    python run_reference.py --version e3f0224 --checkout REF --env cartpole --seed 0 \
        --rows 20000 --eval-every 2000 --eval-episodes 10 --out OUT/ref_s0
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The harness's modules import each other by name (run_reference.py puts this folder on
# the path too); also when this module is loaded by its path, as the tests do.
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import dmc_env  # noqa: E402
import harness as base  # noqa: E402

VERSION = "e3f0224"

# docs/protocol.md section 3's overrides of the reference defaults at e3f0224, on top of
# the reference's own `size1m` preset (configs.yaml @e3f0224: rssm deter 512, hidden 64,
# classes 4; units 64; CNN depth 4), which is what our 1m preset resolves to at e3f0224.
# Batch 16 x 64 trained rows plus the replay's context row (replay_context 1, the
# replay's length 65, dreamerv3/main.py:183-187). The report, log and save clocks are off
# (0: embodied/core/clock.py:107-108), the driver runs in-process (run.debug, train.py:58).
PROTOCOL = {
    "jax.platform": "cpu", "jax.compute_dtype": "float32", "jax.prealloc": False,
    "run.train_ratio": 512.0, "run.envs": 16, "run.debug": True,
    "run.log_every": 0, "run.report_every": 0, "run.save_every": 0,
    "batch_size": 16, "batch_length": 64, "replay_context": 1,
    "logger.outputs": ["jsonl"],
}
# The part of PROTOCOL the harness's loop needs whatever the named configs (--configs)
# set: the clocks its loop leaves out, the in-process envs it checkpoints, the logger's
# outputs it reads back. The rest of PROTOCOL is the protocol run's settings, which a
# named config may change (dmc_proprio: run.train_ratio 1024).
LOOP_KEYS = ("run.debug", "run.log_every", "run.report_every", "run.save_every",
             "logger.outputs")
# --size: our preset names to the reference's named configs (configs.yaml @e3f0224).
SIZES = {"1m": "size1m", "12m": "size12m", "25m": "size25m", "50m": "size50m"}


def task_name(env: str) -> str:
    """The config's `task`: the reference's own for a dmc_ env (its make_env reads it),
    a label for a port."""
    return env if dmc_env.is_dmc(env) else f"gymnax_{env}"


def import_reference(checkout: str | None):
    """The reference's modules, with jax.jit taking e3f0224's positional options on a JAX
    that refuses them (jit_keywords.py: a rename, nothing else)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if checkout:
        sys.path.insert(0, str(Path(checkout).resolve()))
    import jax
    import jit_keywords
    if jit_keywords.install(jax):
        print(f"[ref] jax {jax.__version__}: jax.jit's positional options passed as "
              "keywords (jit_keywords.py)", flush=True)
    import elements
    import embodied
    from dreamerv3 import main as ref_main
    return elements, embodied, ref_main


def reference_configs(ref_main) -> dict:
    """configs.yaml as dreamerv3/main.py:23-24 reads it."""
    from ruamel.yaml import YAML
    return YAML(typ="safe").load((Path(ref_main.__file__).parent / "configs.yaml").read_text())


def build_config(elements, ref_main, opts: dict, logdir: Path):
    """defaults, the protocol's overrides, the named configs of --configs in their order
    (main.py:26-28), the size's named config (size1m unless --size), then what the loop
    needs and the run's own keys, as main.py:23-30 composes named configs and flags.
    Without --configs this is defaults, size, overrides: no size key is an override."""
    configs = reference_configs(ref_main)
    size = SIZES[opts.get("size") or "1m"]
    config = elements.Config(configs["defaults"]).update(PROTOCOL)
    for name in opts.get("configs") or []:
        if name not in configs:
            raise SystemExit(f"--configs {name}: not a named config of the reference's "
                             "configs.yaml")
        config = config.update(configs[name])
    config = config.update(configs[size])
    config = config.update({
        **{k: PROTOCOL[k] for k in LOOP_KEYS}, "seed": opts["seed"],
        "task": task_name(opts["env"]), "logdir": str(logdir), "run.steps": opts["rows"],
        "run.envs": opts["num_envs"]})
    if opts["tiny"]:  # the network widths of the reference's `debug` config only
        config = config.update({"agent": configs["debug"]["agent"]})
    if opts["set"]:
        config = elements.Flags(config).parse([f"--{kv}" for kv in opts["set"]])
    return config


def run_args(elements, config):
    """main.py:55-66."""
    return elements.Config(
        **config.run, replica=config.replica, replicas=config.replicas,
        logdir=config.logdir, batch_size=config.batch_size,
        batch_length=config.batch_length, report_length=config.report_length,
        consec_train=config.consec_train, consec_report=config.consec_report,
        replay_context=config.replay_context)


def check_schedule(args, opts: dict) -> None:
    if any(getattr(args, k) != 0 for k in ("log_every", "report_every", "save_every")):
        raise SystemExit("run.log_every / report_every / save_every must stay 0 "
                         "(ref_loop_head.py leaves their branches out)")
    if not args.debug:
        raise SystemExit("run.debug must be True (in-process envs: the ports are "
                         "checkpointed)")
    if args.consec_train != 1:
        raise SystemExit("consec_train must be 1 (the train stream's position is not "
                         "checkpointed)")
    every, n = opts["eval_every"], args.envs
    if every % n or opts["rows"] % every:
        raise SystemExit(f"--eval-every {every} must be a multiple of run.envs {n} "
                         f"and divide --rows {opts['rows']}")


def retnorm(agent) -> dict:
    """The return normaliser's percentile EMAs (embodied/jax/utils.py:16-90 @e3f0224,
    impl perc, no debiasing) and the scale the actor loss divides by, max(limit, hi - lo)
    (limit 1, configs.yaml @e3f0224 agent.retnorm)."""
    import jax

    def param(name):  # an nj.Variable's entry: retnorm/<name>/value (a top-level module)
        entry = f"retnorm/{name}/value"
        (key,) = [k for k in agent.params if k == entry or k.endswith("/" + entry)]
        return float(jax.device_get(agent.params[key]))

    lo, hi = param("lo"), param("hi")
    return {"lo": lo, "hi": hi, "scale": max(agent.config.retnorm.limit, hi - lo)}


def evaluate(agent, make_env, episodes: int, seed: int, limit: int):
    """run_reference.evaluate at e3f0224: `episodes` fresh envs, one episode each, the
    current parameters, sampled actions (the policy samples in every mode,
    dreamerv3/agent.py:115-135 @e3f0224).

    The jitted `_init_policy` / `_policy` (embodied/jax/agent.py:141-167 @e3f0224) are
    called directly, so the training actor's action counter (its seeds), its carry and its
    lagging parameters are left alone; the envs' resets and the policy seeds come from
    fixed seeds, the same at every evaluation of a run seed. Every transfer is explicit
    (the reference disallows implicit ones)."""
    import jax
    import numpy as np

    envs = [make_env(i) for i in range(episodes)]
    rng = np.random.default_rng((seed, base.POLICY_STREAM))

    def seeds():  # two uint32 words, as Agent._seeds makes them (agent.py:405-408)
        values = rng.integers(0, np.iinfo(np.uint32).max, (2,), np.uint32)
        return jax.device_put(values, agent.policy_mirrored)

    params = jax.device_put({k: agent.params[k].copy() for k in agent.policy_keys},
                            agent.policy_params_sharding)
    carry = agent._init_policy(params, seeds(), episodes)  # positional: pjit

    def act(batch):
        nonlocal carry
        carry, acts, _ = agent._policy(params, seeds(), carry,
                                       jax.device_put(batch, agent.policy_sharded), "eval")
        return jax.device_get(acts)

    played = base.play_episodes(envs, agent.obs_space, act, limit)
    jax.tree.map(lambda x: x.delete(), params)
    return played


class HeadHarness(base.Harness):
    """harness.Harness with the e3f0224 construction, loop and checkpoint."""

    def setup(self) -> None:
        opts, out = self.opts, self.out
        if dmc_env.is_dmc(opts["env"]):
            dmc_env.set_gl_backend(blank=opts["blank_render"])  # before dm_control's import
        self.elements, self.embodied, self.ref_main = import_reference(opts["checkout"])
        if self.resume:
            self.config = self.elements.Config.load(out / "config.yaml").update(
                logdir=str(out))
        else:
            out.mkdir(parents=True, exist_ok=True)
            self.config = build_config(self.elements, self.ref_main, opts, out)
            self.config.save(out / "config.yaml")  # main.py:42
            base.write_options(out, opts)
        self.args = run_args(self.elements, self.config)
        check_schedule(self.args, opts)

    # -- construction (dreamerv3/main.py:127-272 @e3f0224; a port for the env table, or
    # the reference's own make_env for a dmc_ task) --

    def make_env(self, index: int, stream: int = 0, episodes=None):
        """(the env the driver steps, the object whose save/load a checkpoint takes)."""
        if self.port_cls is not None:
            return super().make_env(index, stream, episodes)
        seed = self.opts["seed"]
        env = dmc_env.make_env(self.ref_main, self.config, index, (seed, stream, index),
                               worker=index, episodes=episodes, run_seed=seed,
                               blank=self.opts["blank_render"])
        if not hasattr(self, "eval_limit"):
            self.eval_limit = dmc_env.eval_limit(env, self.repeat())
        return env, env

    def repeat(self) -> int:
        """The env's action repeat (config.env.<suite>.repeat, 1 if none), which
        make_logger's multiplier is (main.py:155)."""
        return int(self.config.env.get(self.config.task.split("_")[0], {}).get("repeat", 1))

    def make_agent(self):
        """main.py:127-149: the agent config the stock make_agent composes."""
        from dreamerv3.agent import Agent
        config = self.config
        env, _ = self.make_env(0)
        obs_space = {k: v for k, v in env.obs_space.items() if not k.startswith("log/")}
        act_space = {k: v for k, v in env.act_space.items() if k != "reset"}
        env.close()
        return Agent(obs_space, act_space, self.elements.Config(
            **config.agent, logdir=config.logdir, seed=config.seed, jax=config.jax,
            batch_size=config.batch_size, batch_length=config.batch_length,
            replay_context=config.replay_context, report_length=config.report_length,
            replica=config.replica, replicas=config.replicas))

    def make_logger(self):
        """JSONL outputs only (main.py:152-180), synchronous, so a checkpoint's file
        offsets cover what was written."""
        elements, logdir = self.elements, self.config.logdir
        return elements.Logger(elements.Counter(), [
            elements.logger.JSONLOutput(logdir, "metrics.jsonl", parallel=False),
            elements.logger.JSONLOutput(logdir, "scores.jsonl", "episode/score",
                                        parallel=False),
        ], self.repeat())

    def build(self) -> None:
        import time
        from functools import partial as bind

        from ref_loop_head import TrainLoop
        t0 = time.time()
        self.loop = TrainLoop(
            self.make_agent, lambda: self.ref_main.make_replay(self.config, "replay"),
            lambda i: self.make_env(i, 0, self.episodes),
            bind(self.ref_main.make_stream, self.config), self.make_logger, self.args)
        self.build_s = time.time() - t0
        self.session_start = time.time()

    # -- checkpoint --

    def checkpoint(self, parallel: bool):
        """The stock elements.Checkpoint (one folder per save, `latest`, keep 1) with step
        and agent as train.py:83-86 registers them, then our entries
        (resume_state_head.py); `parallel` is unused (saving runs in this thread)."""
        from resume_state_head import HarnessEntry, ReplaySnapshot
        ckpt = self.elements.Checkpoint(self.out / "ckpt", keep=1)
        ckpt.step = self.loop.step
        ckpt.agent = self.loop.agent
        ckpt.harness = HarnessEntry(self.loop, self.state, self.restore)
        ckpt.replay = ReplaySnapshot(self.loop.replay)
        return ckpt

    # -- record fields --

    def updates(self) -> int:
        return int(self.loop.agent.n_updates)

    def retnorm(self) -> dict:
        return retnorm(self.loop.agent)

    def evaluate(self):
        limit = self.eval_limit if self.port_cls is None else self.port_cls.limit
        return evaluate(self.loop.agent, lambda i: self.make_env(i, base.EVAL_STREAM)[0],
                        self.opts["eval_episodes"], self.opts["seed"], limit)
