"""The harness of run_reference.py at 29eb964: options, configuration, evaluation,
records and checkpoints. run_reference_head.py builds e3f0224's harness on this one.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVAL_STREAM = 1  # SeedSequence streams: 0 training envs, 1 evaluation envs,
POLICY_STREAM = 2  # 2 the evaluation policy's sampling seeds
SIDE = "ref"

# docs/protocol.md section 3's overrides of the reference defaults, with our 1m preset's
# widths (dreamerjax/config.py SIZES["1m"]: deter 512, hidden 64, classes 4, units 64, CNN
# depth 16; stoch 32 and 8 blocks are the defaults). Batch 16 x 65: the reference counts
# the context row (configs.yaml batch_length, replay_context 1).
PROTOCOL = {
    "jax.platform": "cpu", "jax.compute_dtype": "float32", "jax.param_dtype": "float32",
    "jax.prealloc": False, "jax.transfer_guard": False,
    "dyn.rssm.deter": 512, "dyn.rssm.hidden": 64, "dyn.rssm.classes": 4,
    r".*\.units": 64, r".*\.depth": 16,
    "run.train_ratio": 512.0, "run.num_envs": 16, "run.driver_parallel": False,
    "run.log_every": -1, "run.eval_every": -1, "run.save_every": -1,
    "batch_size": 16, "batch_length": 65,
}
# --tiny: the network widths of the reference's own `debug` config (configs.yaml:275-288),
# read from the checkout; its other keys (batch, envs, ratio, time limit, jax.debug) are
# not applied, so a smoke run keeps the protocol's schedule.
TINY_KEYS = ("dyn.rssm", r".*\.layers", r".*\.units", r".*\.depth", "(rewhead|critic).bins")


VERSIONS = ("29eb964", "e3f0224")
OPTIONS = ("seed", "env", "rows", "eval_every", "eval_episodes", "num_envs", "tiny", "set",
           "checkout", "version", "size", "no_checkpoint", "configs", "blank_render")
CHECKPOINT = {"29eb964": "checkpoint.ckpt", "e3f0224": "ckpt/latest"}


def resolve_options(args) -> dict:
    """The run's options: from the command line, or from OUT/harness.json on --resume
    (where only --stop-after and --checkout may be given anew)."""
    out = Path(args.out)
    if not args.resume:
        if out.exists() and any(out.iterdir()):
            raise SystemExit(f"--out {out} is not empty: use --resume, or a new directory")
        return {k: getattr(args, k) for k in OPTIONS}
    if not (out / "harness.json").exists():
        raise SystemExit(f"{out}: no harness.json, not a run directory of this harness")
    saved = json.loads((out / "harness.json").read_text())
    saved.setdefault("version", "29eb964")  # run directories from before --version
    saved.setdefault("size", "1m")  # ... and before --size, --no-checkpoint
    saved.setdefault("no_checkpoint", False)
    saved.setdefault("configs", [])  # ... and before --configs
    saved.setdefault("blank_render", False)  # ... and before --blank-render
    if not (out / CHECKPOINT[saved["version"]]).exists():
        raise SystemExit(f"{out}: no checkpoint yet (killed before the first record "
                         "point): remove the directory and start afresh")
    if (out / "timing.json").exists():
        raise SystemExit(f"{out}: the run has finished (timing.json exists)")
    if args.checkout:
        saved["checkout"] = args.checkout
    return saved


def write_options(out: Path, opts: dict) -> None:
    write_atomic(out / "harness.json", json.dumps(opts, indent=1) + "\n")


def import_reference(checkout: str | None):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if checkout:
        sys.path.insert(0, str(Path(checkout).resolve()))
    sys.path.insert(0, str(HERE))
    import embodied
    from dreamerv3 import agent as agt
    from dreamerv3 import main as ref_main
    return embodied, agt, ref_main


def build_config(embodied, agt, opts: dict, logdir: Path):
    """defaults + the overrides + main.py:35-38's derived lengths, as main.py:30-38 does."""
    config = embodied.Config(agt.Agent.configs["defaults"])
    config = config.update({
        **PROTOCOL, "seed": opts["seed"], "task": f"gymnax_{opts['env']}",
        "logdir": str(logdir), "run.steps": opts["rows"], "run.num_envs": opts["num_envs"]})
    if opts["tiny"]:
        debug = agt.Agent.configs["debug"]
        config = config.update({k: debug[k] for k in TINY_KEYS})
    if opts["set"]:
        config = embodied.Flags(config).parse([f"--{kv}" for kv in opts["set"]])
    return config.update(
        replay_length=config.replay_length or config.batch_length,
        replay_length_eval=config.replay_length_eval or config.batch_length_eval)


def load_config(embodied, path: Path):
    """config.yaml as Config.save wrote it (config.py:28-39; its load calls a read_text
    that embodied's LocalPath lacks)."""
    from ruamel.yaml import YAML
    return embodied.Config(YAML(typ="safe").load(path.read_text()))


def run_args(embodied, config):
    """main.py:39-47."""
    return embodied.Config(
        **config.run, logdir=config.logdir, batch_size=config.batch_size,
        batch_length=config.batch_length, batch_length_eval=config.batch_length_eval,
        replay_length=config.replay_length, replay_length_eval=config.replay_length_eval,
        replay_context=config.replay_context)


def check_schedule(args, opts: dict) -> None:
    if max(args.log_every, args.eval_every, args.save_every) >= 0:
        raise SystemExit("run.log_every / eval_every / save_every must stay -1 "
                         "(ref_loop.py leaves their branches out)")
    if args.driver_parallel:
        raise SystemExit("run.driver_parallel must be False (the ports are checkpointed)")
    every, n = opts["eval_every"], args.num_envs
    if every % n or opts["rows"] % every:
        raise SystemExit(f"--eval-every {every} must be a multiple of run.num_envs {n} "
                         f"and divide --rows {opts['rows']}")


# ---------------------------------------------------------------------------------------
# Files


def append_line(path: Path, row: dict) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, allow_nan=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_episodes(path: Path, episodes: list) -> None:
    write_atomic(path, "".join(json.dumps(e, allow_nan=False) + "\n" for e in episodes))


def size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def truncate(path: Path, nbytes: int) -> None:
    """Cut what a killed run wrote after its checkpoint."""
    if size(path) < nbytes:
        raise SystemExit(f"{path} is shorter than its checkpoint says: changed since")
    if path.exists():
        os.truncate(path, nbytes)


# ---------------------------------------------------------------------------------------
# Record fields


def finite(x) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def mean(xs) -> float | None:
    xs = list(xs)
    return finite(sum(xs) / len(xs)) if xs else None


def train_means(agg_result: dict) -> dict:
    """The window means: scalar train/<name> entries, prefix removed, */dist dropped."""
    import numpy as np
    out = {}
    for key, value in agg_result.items():
        if key.startswith("train/") and not key.endswith("/dist") and np.ndim(value) == 0:
            out[key[len("train/"):]] = finite(value)
    return out


def retnorm(agent) -> dict:
    """The return normaliser's percentile EMAs (jaxutils.py:301-396, impl perc) and the
    scale the actor loss divides by, max(1, hi - lo) (limit 1, configs.yaml:141)."""
    def param(name):  # an nj.Variable's entry is <module>/<name>/value (ninjax.py:542-553)
        (key,) = [k for k in agent.params if k.endswith(f"/retnorm/{name}/value")]
        return float(agent.params[key])

    lo, hi = param("low"), param("high")
    return {"lo": lo, "hi": hi, "scale": max(agent.config.retnorm.limit, hi - lo)}


# ---------------------------------------------------------------------------------------
# Evaluation


def evaluate(agent, make_env, episodes: int, seed: int, limit: int):
    """`episodes` fresh envs, one episode each, the current parameters, sampled actions.

    The jitted `_init_policy` / `_policy` (jaxagent.py:352-355) are called directly, so the
    training actor's seed stream and its parameter swap (jaxagent.py:140-153) are left
    alone; the envs' resets and the policy seeds come from fixed seeds, the same at every
    evaluation of a run seed."""
    import jax
    import numpy as np

    envs = [make_env(i) for i in range(episodes)]
    rng = np.random.default_rng((seed, POLICY_STREAM))
    shape = [2 * x for x in agent.policy_sharded.mesh.devices.shape]

    def seeds():
        values = rng.integers(0, np.iinfo(np.uint32).max, shape, np.uint32)
        return jax.device_put(values, agent.policy_sharded)

    params = jax.device_put({k: agent.params[k].copy() for k in agent.policy_keys},
                            agent.policy_mirrored)
    carry = agent._init_policy(params, seeds(), episodes)  # positional: pjit

    def act(batch):
        nonlocal carry
        acts, _, carry = agent._policy(params, jax.device_put(batch, agent.policy_sharded),
                                       carry, seeds(), "eval")
        return {k: np.asarray(v) for k, v in acts.items()}

    played = play_episodes(envs, agent.keys, act, limit)
    jax.tree.map(lambda x: x.delete(), params)
    return played


def play_episodes(envs, obs_keys, act, limit: int):
    """One episode in each env: all reset, then stepped together with `act`'s actions (an
    env whose episode ended is no longer stepped) for at most `limit` steps.

    act: {key: [N, ...]} observations of the keys in `obs_keys` -> {key: [N, ...]} numpy
    actions. Returns the N returns and lengths."""
    import numpy as np

    act_space = {k: v for k, v in envs[0].act_space.items() if k != "reset"}
    zeros = {k: np.zeros(v.shape, v.dtype) for k, v in act_space.items()}
    obs = [env.step({**zeros, "reset": True}) for env in envs]
    keys = [k for k in obs[0] if k in obs_keys]
    returns, lengths = np.zeros(len(envs)), np.zeros(len(envs), int)
    done = np.zeros(len(envs), bool)
    for _ in range(limit):
        acts = act({k: np.stack([o[k] for o in obs]) for k in keys})
        for i, env in enumerate(envs):
            if done[i]:
                continue
            obs[i] = env.step({**{k: v[i] for k, v in acts.items()}, "reset": False})
            returns[i] += float(obs[i]["reward"])
            lengths[i] += 1
            done[i] = bool(obs[i]["is_last"])
        if done.all():
            break
    return [float(r) for r in returns], [int(n) for n in lengths]


# ---------------------------------------------------------------------------------------
# The run


class Harness:
    """The reference's agent, replay, envs and loop, plus the record set's bookkeeping."""

    def __init__(self, opts: dict, out: Path, resume: bool) -> None:
        self.opts, self.out, self.resume = opts, out, resume
        self.setup()
        from dmc_env import is_dmc
        from gymnax_ports import PORTS
        # The port class; None for the reference's own DMC env (e3f0224: dmc_env.py).
        self.port_cls = None if is_dmc(opts["env"]) else PORTS[opts["env"]]
        self.episodes: list[dict] = []
        self.last_episode = 0  # episodes before this index ended in an earlier interval
        self.points: list[dict] = []  # per record point: rows, updates, wall and eval time
        self.wall_before = 0.0  # wall seconds of earlier sessions
        self.sessions: list[dict] = []

    def setup(self) -> None:
        """Import the reference; the config (built, or on resume read back), the run
        arguments."""
        opts, out = self.opts, self.out
        self.embodied, self.agt, self.ref_main = import_reference(opts["checkout"])
        embodied = self.embodied
        if self.resume:
            # logdir follows the directory, should it have moved since.
            self.config = load_config(embodied, out / "config.yaml").update(logdir=str(out))
        else:
            out.mkdir(parents=True, exist_ok=True)
            self.config = build_config(embodied, self.agt, opts, out)
            self.config.save(embodied.Path(out / "config.yaml"))  # main.py:54
            write_options(out, opts)
        self.args = run_args(embodied, self.config)
        check_schedule(self.args, opts)

    # -- construction (dreamerv3/main.py:136-225, with the port for the env table) --

    def make_env(self, index: int, stream: int = 0, episodes=None):
        from port_env import PortEnv
        port = PortEnv(self.port_cls, (self.opts["seed"], stream, index), worker=index,
                       episodes=episodes, run_seed=self.opts["seed"])
        return self.ref_main.wrap_env(port, self.config), port

    def make_agent(self):
        env, _ = self.make_env(0)
        agent = self.agt.Agent(env.obs_space, env.act_space, self.config)
        env.close()
        return agent

    def make_logger(self):
        """JSONL outputs only (main.py:147-159's TensorBoard output needs tensorflow);
        synchronous, so a checkpoint's file offsets cover what was written."""
        embodied, logdir = self.embodied, self.config.logdir
        return embodied.Logger(embodied.Counter(), [
            embodied.logger.JSONLOutput(logdir, "metrics.jsonl", parallel=False),
            embodied.logger.JSONLOutput(logdir, "scores.jsonl", "episode/score",
                                        parallel=False),
        ])

    def build(self) -> None:
        from ref_loop import TrainLoop
        t0 = time.time()
        self.loop = TrainLoop(
            self.make_agent, lambda: self.ref_main.make_replay(self.config, "replay"),
            lambda i: self.make_env(i, 0, self.episodes), self.make_logger, self.args)
        self.build_s = time.time() - t0
        self.session_start = time.time()

    # -- checkpoint --

    def checkpoint(self, parallel: bool):
        """The stock Checkpoint (embodied/core/checkpoint.py) with step and agent as
        train.py:94-96 registers them, the full replay and our entry (resume_state.py).
        Saving runs in this thread (parallel=False) so nothing trains meanwhile; loading
        needs parallel=True (its load reads `_promise`, set only then)."""
        from resume_state import HarnessEntry, ReplaySnapshot
        ckpt = self.embodied.Checkpoint(self.out / "checkpoint.ckpt", parallel=parallel)
        ckpt.step = self.loop.step
        ckpt.agent = self.loop.agent
        ckpt.replay = ReplaySnapshot(self.loop.replay)
        ckpt.harness = HarnessEntry(self.loop, self.state, self.restore)
        return ckpt

    def updates(self) -> int:
        return int(self.loop.agent.updates)

    def retnorm(self) -> dict:
        return retnorm(self.loop.agent)

    def evaluate(self):
        return evaluate(self.loop.agent, lambda i: self.make_env(i, EVAL_STREAM)[0],
                        self.opts["eval_episodes"], self.opts["seed"], self.port_cls.limit)

    def files(self) -> dict:
        return {name: self.out / name
                for name in ("records.jsonl", "metrics.jsonl", "scores.jsonl")}

    def state(self) -> dict:
        return {"episodes": list(self.episodes), "last_episode": self.last_episode,
                "points": self.points, "wall_s": self.wall(),
                "sessions": self.sessions + [self.session()],
                "offsets": {k: size(p) for k, p in self.files().items()}}

    def restore(self, state: dict) -> None:
        self.episodes[:] = state["episodes"]
        self.last_episode = state["last_episode"]
        self.points = state["points"]
        self.wall_before = state["wall_s"]
        self.sessions = state["sessions"]
        for name, path in self.files().items():
            truncate(path, state["offsets"][name])
        write_episodes(self.out / "episodes.jsonl", self.episodes)

    def wall(self) -> float:
        return self.wall_before + time.time() - self.session_start

    def session(self) -> dict:
        return {"start": self.session_start, "build_s": self.build_s,
                "resumed_at_rows": self.resumed_at, "wall_s": time.time() - self.session_start}

    # -- record point (ADDITION 1's body) --

    def record(self, rows: int) -> None:
        loop, opts = self.loop, self.opts
        t0 = time.time()
        train = train_means(loop.agg.result())  # resets the window (agg.py:23-34)
        t1 = time.time()
        returns, lengths = self.evaluate()
        eval_s = time.time() - t1
        new = self.episodes[self.last_episode:]
        self.last_episode = len(self.episodes)
        row = {
            "side": SIDE, "seed": opts["seed"], "rows": rows, "updates": self.updates(),
            "eval_mean": mean(returns), "eval_len_mean": mean(lengths),
            "eval_returns": returns, "eval_lengths": lengths,
            "train_return": mean(e["score"] for e in new),
            "s2_logged": None,  # compare recomputes S2 from episodes.jsonl
            "train": train, "retnorm": self.retnorm(), "wall_s": self.wall(),
        }
        append_line(self.out / "records.jsonl", row)
        write_episodes(self.out / "episodes.jsonl", self.episodes)
        loop.logger.write()
        self.points.append({"rows": rows, "updates": row["updates"], "wall_s": row["wall_s"],
                            "eval_s": eval_s})
        t2 = time.time()
        if not opts["no_checkpoint"]:
            self.checkpoint(parallel=False).save()
        self.points[-1]["checkpoint_s"] = time.time() - t2
        print(f"[ref] rows {rows} updates {row['updates']} eval_mean {row['eval_mean']:.1f} "
              f"train_return {_fmt(row['train_return'])} wall {row['wall_s']:.0f}s "
              f"(record {time.time() - t0:.1f}s, eval {eval_s:.1f}s)", flush=True)

    # -- main --

    def run(self, stop_after: int) -> int:
        self.resumed_at = None
        self.build()
        restore = None
        if self.resume:
            def restore():
                self.checkpoint(parallel=True).load()
                self.resumed_at = int(self.loop.step)
                print(f"[ref] resumed at rows {self.resumed_at}, updates "
                      f"{self.updates()}", flush=True)
        self.loop.start(restore)
        finished = self.loop.run(self.record, self.opts["eval_every"], stop_after)
        if not finished:
            print(f"[ref] stopped after rows {int(self.loop.step)}: continue with --resume",
                  flush=True)
            return 0
        before = len(self.episodes)
        self.loop.flush()  # ADDITION 2
        write_episodes(self.out / "episodes.jsonl", self.episodes)  # ADDITION 3
        self.loop.logger.close()
        timing = {"flush_episodes": len(self.episodes) - before, "wall_s": self.wall(),
                  "points": self.points, "sessions": self.sessions + [self.session()]}
        write_atomic(self.out / "timing.json", json.dumps(timing, indent=1) + "\n")
        print(f"[ref] finished: {len(self.episodes)} episodes, "
              f"{timing['flush_episodes']} ended by the flush step", flush=True)
        return 0


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.1f}"
