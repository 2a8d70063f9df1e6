"""The training run: init -> compiled chunks of ticks (acting, replay, updates) -> evaluation
-> records, with every seed of a run in one program (vmap over a leading seed axis).

One tick = every env of every seed takes one step: the policy acts on the current rows,
the rows (with the action and the posterior latent) enter the replay, the updates that the
train-ratio schedule owes at this tick run, then the envs step to the next rows. Python runs
only between chunks (one chunk = one log interval).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax import agent as agent_lib
from dreamerjax import envs as envs_lib
from dreamerjax import replay as replay_lib
from dreamerjax import schedule as schedule_lib
from dreamerjax.config import Config, RunConfig, agent_config, tiny_agent_config, with_cnn
from dreamerjax.numerics import TWOHOT_MEANS

f32 = jnp.float32


@flax.struct.dataclass
class SeedState:
    """Everything one seed's run carries between ticks (leading seed axis when batched)."""

    agent: agent_lib.AgentState
    replay: Any  # replay_lib.ReplayState
    env: Any  # envs_lib.CollectorState, leading [num_envs]
    row: dict  # the current row of every env, [num_envs, ...]
    carry: dict  # policy carry {deter, stoch, action}, [num_envs, ...]
    key: jax.Array
    msum: dict  # per-metric running MEANS over the log window (NaN skipped; the name is kept
    #             so that checkpoints stay restorable)
    mcount: dict  # per-metric finite counts over the window
    bad_update: jax.Array  # int32: first update index with a non-finite loss, -1 if none
    updates: jax.Array  # int32: updates done


@dataclasses.dataclass(frozen=True)
class Setup:
    """Static description of a run: config, env spec, agent spaces, schedule."""

    config: Config
    spec: Any
    spaces: agent_lib.Spaces
    capacity: int
    ticks_per_log: int

    @property
    def run(self) -> RunConfig:
        return self.config.run


# ----------------------------------------------------------------------------- setup


def make_config(env: str = "CartPole-v1", size: str = "1m", tiny: bool = False,
                cnn_mults: tuple[int, ...] | None = None, cnn_minres: int | None = None,
                twohot_mean: str | None = None, **run_overrides) -> Config:
    acfg = tiny_agent_config() if tiny else agent_config(size)
    acfg = with_cnn(acfg, cnn_mults, cnn_minres)
    if twohot_mean is not None:
        acfg = dataclasses.replace(acfg, twohot_mean=twohot_mean)
    run = dataclasses.replace(RunConfig(env=env), **run_overrides)
    return Config(agent=acfg, run=run, size="tiny" if tiny else size)


def spaces_of(spec) -> agent_lib.Spaces:
    if spec.discrete:
        return agent_lib.Spaces(tuple(spec.obs_shape), True, int(spec.num_actions))
    return agent_lib.Spaces(tuple(spec.obs_shape), False, int(spec.action_dims))


def make_setup(config: Config) -> Setup:
    """Validate the config against the env before anything compiles."""
    run = config.run
    spec = envs_lib.make_env(run.env, run.episode_limit)
    spaces = spaces_of(spec)
    if spec.is_image and len(spaces.obs_shape) == 3:
        from dreamerjax import nets
        nets.cnn_strides(config.agent.enc, spaces.obs_shape[0])
    if config.agent.twohot_mean not in TWOHOT_MEANS:
        raise ValueError(f"twohot_mean {config.agent.twohot_mean!r}: choose one of "
                         f"{', '.join(TWOHOT_MEANS)}")
    if run.steps <= 0 or run.eval_every <= 0:
        raise ValueError("steps and eval_every must be positive")
    if run.eval_every % run.num_envs or run.steps % run.eval_every:
        raise ValueError(
            f"eval_every ({run.eval_every}) must be a multiple of num_envs ({run.num_envs}) "
            f"and divide steps ({run.steps})")
    capacity = run.replay_capacity or math.ceil(run.steps / run.num_envs)
    length = run.batch_length + run.replay_context
    if capacity < length:
        raise ValueError(
            f"replay capacity {capacity} rows per env is shorter than one batch row "
            f"sequence ({length} = batch_length {run.batch_length} + context "
            f"{run.replay_context}); raise --steps or replay_capacity")
    return Setup(config, spec, spaces, capacity, run.eval_every // run.num_envs)


def updates_per_tick(setup: Setup) -> np.ndarray:
    """Updates owed after each tick of the whole run (exact reference schedule)."""
    run = setup.run
    sched = schedule_lib.schedule_from_config(run)
    ticks = np.arange(run.steps // run.num_envs)
    return np.asarray(jax.vmap(lambda t: schedule_lib.updates_owed(sched, t))(ticks), np.int32)


# ----------------------------------------------------------------------------- per seed


def _metric_names(setup: Setup) -> list[str]:
    """Metric names of one update, found by tracing (no compile)."""
    state = jax.eval_shape(lambda k: init_seed(setup, k), jax.random.PRNGKey(0))
    batch = _example_batch(setup)
    _, _, mets = jax.eval_shape(
        lambda s, b: agent_lib.update(s, setup.config.agent, setup.spaces, b,
                                      jax.random.PRNGKey(0)), state.agent, batch)
    return sorted(mets)


def _example_batch(setup: Setup):
    run, cfg = setup.run, setup.config.agent
    B, L = run.batch_size, run.batch_length + run.replay_context
    sd = jax.ShapeDtypeStruct
    act = (sd((B, L), jnp.int32) if setup.spaces.act_discrete
           else sd((B, L, setup.spaces.act_dim), f32))
    return {
        "obs": sd((B, L, *setup.spaces.obs_shape), f32), "action": act,
        "reward": sd((B, L), f32), "is_first": sd((B, L), bool),
        "is_last": sd((B, L), bool), "is_terminal": sd((B, L), bool),
        "deter": sd((B, L, cfg.rssm.deter), f32), "stoch": sd((B, L, cfg.rssm.stoch), jnp.int32),
    }


def _empty_row(setup: Setup, row):
    cfg = setup.config.agent
    sp = setup.spaces
    action = (jnp.zeros((), jnp.int32) if sp.act_discrete else jnp.zeros((sp.act_dim,), f32))
    return envs_lib.replay_row(
        row, action, jnp.zeros((cfg.rssm.deter,), f32),
        jnp.zeros((cfg.rssm.stoch,), jnp.int32))


def init_seed(setup: Setup, key, metric_names: tuple = ()) -> SeedState:
    run, cfg = setup.run, setup.config.agent
    k_agent, k_env, k_run = jax.random.split(key, 3)
    agent_state = agent_lib.init(k_agent, cfg, setup.spaces)
    env_keys = jax.random.split(k_env, run.num_envs)
    env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(env_keys)
    example = _empty_row(setup, jax.tree.map(lambda x: x[0], row))
    replay = replay_lib.replay_init(run.num_envs, setup.capacity, example,
                                    run.batch_length + run.replay_context)
    carry = agent_lib.policy_initial(cfg, setup.spaces, run.num_envs)
    zeros = {k: jnp.zeros((), f32) for k in metric_names}
    return SeedState(agent=agent_state, replay=replay, env=env, row=row, carry=carry,
                     key=k_run, msum=zeros, mcount=dict(zeros),
                     bad_update=jnp.full((), -1, jnp.int32), updates=jnp.zeros((), jnp.int32))


def act_and_store(setup: Setup, s: SeedState):
    """Policy on the current rows, store them in the replay, step the envs.
    Returns (state, episode ends [num_envs])."""
    key, k_pol, k_env = jax.random.split(s.key, 3)
    stored, carry, env, new_row, ends = act_and_step(
        setup, s.agent.params, s.carry, s.row, s.env, k_pol, k_env)
    replay = replay_lib.replay_add(s.replay, stored)
    return s.replace(replay=replay, env=env, row=new_row, carry=carry, key=key), ends


def act_and_step(setup: Setup, params, carry, row, env, k_pol, k_env):
    """The acting step shared by training and evaluation: the policy on the current rows
    [n], then every env steps. Returns (the rows to store, with the action taken and the
    posterior latent; carry; env; next rows; episode ends [n]). The stored action is zeroed
    on is_last rows, where the env resets and ignores it."""
    cfg = setup.config.agent
    act, carry, latent = agent_lib.policy(
        params, cfg, setup.spaces, carry, row["obs"], row["is_first"], k_pol)
    stored = jax.vmap(envs_lib.replay_row)(row, act, latent["deter"], latent["stoch"])
    env_keys = jax.random.split(k_env, row["is_first"].shape[0])
    env, new_row, ends = jax.vmap(
        lambda st, a, k: envs_lib.collector_step(setup.spec, st, a, k))(
        env, stored["action"], env_keys)
    return stored, carry, env, new_row, ends


def train_once(setup: Setup, s: SeedState) -> SeedState:
    """Sample a batch (online queue first), update, write the latents back."""
    run, cfg = setup.run, setup.config.agent
    key, k_sample, k_update = jax.random.split(s.key, 3)
    replay, batch, index = replay_lib.replay_sample(
        s.replay, k_sample, run.batch_size, run.batch_length + run.replay_context)
    batch = dict(batch)
    batch["obs"] = batch["obs"].astype(f32)
    agent_state, outs, mets = agent_lib.update(s.agent, cfg, setup.spaces, batch, k_update)
    replay = replay_lib.replay_write_latents(
        replay, index, outs["replay"]["deter"], outs["replay"]["stoch"])
    # Running window means (NaN skipped, as the reference's Agg): a float32 running sum
    # would lose the last digits of large metrics such as opt_param_count.
    finite = {k: jnp.isfinite(v) for k, v in mets.items()}
    mcount = {k: s.mcount[k] + finite[k].astype(f32) for k in s.mcount}
    msum = {k: jnp.where(finite[k], s.msum[k] + (mets[k].astype(f32) - s.msum[k])
                         / jnp.maximum(mcount[k], 1.0), s.msum[k]) for k in s.msum}
    ok = jnp.isfinite(mets["opt_loss"]) & jnp.isfinite(mets["opt_grad_norm"])
    bad = jnp.where((s.bad_update < 0) & ~ok, s.updates, s.bad_update)
    return s.replace(agent=agent_state, replay=replay, key=key, msum=msum, mcount=mcount,
                     bad_update=bad, updates=s.updates + 1)


def run_chunk(setup: Setup, states: SeedState, owed: jax.Array):
    """Scan over the ticks of one log interval. states has a leading seed axis; owed [ticks]
    is the number of updates due after each tick (shared by all seeds, so the update loop
    below is an unbatched while loop). Returns (states, episode ends [ticks, seeds, envs])."""

    def tick(states, n):
        states, ends = jax.vmap(lambda s: act_and_store(setup, s))(states)
        states = jax.lax.fori_loop(
            0, n, lambda _, st: jax.vmap(lambda s: train_once(setup, s))(st), states)
        return states, ends

    return jax.lax.scan(tick, states, owed)


def evaluate(setup: Setup, params, key, episodes: int):
    """Fresh envs, the first episode of each, up to the episode limit, sampling policy with
    the given params. Returns (returns [episodes], lengths [episodes])."""
    cfg = setup.config.agent
    spec = setup.spec
    k_init, k_run = jax.random.split(key)
    env, row = jax.vmap(lambda k: envs_lib.collector_init(spec, k))(
        jax.random.split(k_init, episodes))
    carry = agent_lib.policy_initial(cfg, setup.spaces, episodes)
    zeros = jnp.zeros((episodes,), f32)

    def step(c, k):
        env, row, carry, ret, length, done = c
        k_pol, k_env = jax.random.split(k)
        _, carry, env, row, _ = act_and_step(setup, params, carry, row, env, k_pol, k_env)
        live = ~done
        ret = ret + jnp.where(live, row["reward"], 0.0)
        length = length + live.astype(f32)
        done = done | row["is_last"]
        return (env, row, carry, ret, length, done), None

    init = (env, row, carry, zeros, zeros, jnp.zeros((episodes,), bool))
    (_, _, _, ret, length, _), _ = jax.lax.scan(
        step, init, jax.random.split(k_run, spec.episode_limit))
    return ret, length


# ----------------------------------------------------------------------------- driver


@dataclasses.dataclass
class Trainer:
    """Owns the compiled functions of a run and drives its chunks."""

    setup: Setup
    seeds: tuple[int, ...]
    devices: int = 1

    def __post_init__(self):
        setup = self.setup
        self.metric_names = tuple(_metric_names(setup))
        self.owed = updates_per_tick(setup)
        self.sharding = _seed_sharding(self.devices, len(self.seeds))
        names = self.metric_names
        init_fn = jax.vmap(lambda k: init_seed(setup, k, names))
        self._init = jax.jit(init_fn, out_shardings=self.sharding)
        # Pin the seed axis of the chunk's state (and of the episode ends [ticks, seeds, envs])
        # to the mesh, so every device keeps its own seeds through the whole chunk.
        shard = {}
        if self.sharding is not None:
            mesh, spec = self.sharding.mesh, jax.sharding.PartitionSpec
            owed_sh = jax.sharding.NamedSharding(mesh, spec())  # replicated
            ends_sh = jax.sharding.NamedSharding(mesh, spec(None, "seed"))
            shard = {"in_shardings": (self.sharding, owed_sh),
                     "out_shardings": (self.sharding, ends_sh)}
        self._chunk = jax.jit(lambda st, owed: run_chunk(setup, st, owed), donate_argnums=0,
                              **shard)
        eps = setup.run.eval_episodes
        self._eval = jax.jit(jax.vmap(lambda p, k: evaluate(setup, p, k, eps)))

    # Host inputs go in as numpy arrays: in a multi-host run every process passes the same
    # values, which jit takes as replicated (a device array would be process-local).
    def init(self) -> SeedState:
        keys = np.stack([np.asarray(jax.random.PRNGKey(s)) for s in self.seeds])
        return self._init(keys)

    def chunk(self, states: SeedState, log_index: int):
        t = self.setup.ticks_per_log
        owed = np.asarray(self.owed[log_index * t:(log_index + 1) * t])
        return self._chunk(states, owed)

    def evaluate(self, states: SeedState, log_index: int):
        keys = np.stack([
            np.asarray(jax.random.fold_in(jax.random.PRNGKey(s), 1_000_000 + log_index))
            for s in self.seeds])
        return self._eval(states.agent.params, keys)


def _seed_sharding(devices: int, num_seeds: int):
    if devices <= 1:
        return None
    avail = jax.devices()
    if devices > len(avail):
        raise ValueError(f"--devices {devices} but only {len(avail)} JAX devices are visible")
    if num_seeds % devices:
        raise ValueError(f"{num_seeds} seeds cannot be split evenly over {devices} devices")
    mesh = jax.sharding.Mesh(np.array(avail[:devices]), ("seed",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("seed"))


def _to_host(tree):
    """numpy copies of (possibly sharded) arrays; gathered from every process when the run
    spans several (each process holds only its own seeds' shards)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils
        tree = multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree.map(np.asarray, tree)


def enable_compile_cache(enabled: bool = True) -> None:
    if not enabled:
        return
    path = os.path.join(os.path.expanduser(os.environ.get("XDG_CACHE_HOME", "~/.cache")),
                        "dreamerjax", "jax")
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _window(host: dict, names, i: int) -> dict:
    out = {}
    for k in names:
        c = float(host["mcount"][k][i])
        out[k] = float(host["msum"][k][i]) if c > 0 else None
    return out


def _reset_windows(states: SeedState) -> SeedState:
    return states.replace(msum=jax.tree.map(jnp.zeros_like, states.msum),
                          mcount=jax.tree.map(jnp.zeros_like, states.mcount))


def train(config: Config, seeds: tuple[int, ...], out: str, resume: bool = False,
          devices: int = 1, progress: bool = True, compile_cache: bool = True,
          stop_after_rows: int | None = None) -> list[dict]:
    """Run (or resume) a training run; returns the records written by this call.

    stop_after_rows ends the call early at that log point (as an interruption would),
    leaving a checkpoint to resume from; the run's config is unchanged."""
    from dreamerjax import checkpoint as ckpt
    from dreamerjax import plots, records

    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be unique and non-empty, got {seeds}")
    setup = make_setup(config)
    enable_compile_cache(compile_cache)
    trainer = Trainer(setup, tuple(seeds), devices)
    primary = jax.process_index() == 0  # writes the run directory's files
    run = setup.run
    num_logs = run.steps // run.eval_every
    tracker = records.EpisodeTracker()
    start_log, wall0 = 0, 0.0
    states = trainer.init()
    # realpath: --out may be a link to a directory not made yet (e.g. on another disk).
    os.makedirs(os.path.realpath(out), exist_ok=True)
    if resume:
        found = ckpt.latest(out)
        if found is None:
            raise ValueError(f"no checkpoint to resume in {out}")
        index, meta = found
        ckpt.check_compatible(meta["config"], config.to_dict())
        if tuple(meta["seeds"]) != tuple(seeds):
            raise ValueError(f"checkpoint seeds {meta['seeds']} != requested {list(seeds)}")
        states = ckpt.restore(out, index, states)
        tracker = records.EpisodeTracker.from_dict(meta["tracker"])
        start_log, wall0 = meta["log_index"] + 1, meta["wall_s"]
        if primary:
            _truncate_logs(out, meta["rows"], run.num_envs)
    written = []
    bar = _progress(progress and primary, run.steps, start_log * run.eval_every)
    t0 = time.time() - wall0
    with records.RunWriter(out) if primary else records.NullWriter() as writer:
        if not resume:
            writer.write_config(config.to_dict() | {"seeds": list(seeds)})
        last_eval = None
        for log_index in range(start_log, num_logs):
            if stop_after_rows is not None and log_index * run.eval_every >= stop_after_rows:
                break
            states, ends = trainer.chunk(states, log_index)
            rets, lens = trainer.evaluate(states, log_index)
            rn = states.agent.retnorm
            host = _to_host({
                "rets": rets, "lens": lens, "ends": ends, "bad": states.bad_update,
                "updates": states.updates, "lo": rn.low, "hi": rn.high,
                "msum": states.msum, "mcount": states.mcount})
            rows_done = (log_index + 1) * run.eval_every
            first_tick = log_index * setup.ticks_per_log
            episodes = _episodes(host["ends"], seeds, first_tick)
            for e in episodes:
                tracker.add(**e)
            writer.add_episodes(episodes)
            bad = host["bad"]
            if (bad >= 0).any():
                raise FloatingPointError(
                    f"non-finite loss at update {int(bad[bad >= 0].min())} (seeds "
                    f"{[s for s, b in zip(seeds, bad, strict=False) if b >= 0]}); stopped at row "
                    f"{rows_done}; the last good checkpoint in {out} is kept")
            wall = time.time() - t0
            recs = []
            for i, seed in enumerate(seeds):
                lo, hi = float(host["lo"][i]), float(host["hi"][i])
                recs.append(records.record_row(
                    side="dreamerjax", seed=seed, rows=rows_done,
                    updates=int(host["updates"][i]), eval_returns=host["rets"][i].tolist(),
                    eval_lengths=host["lens"][i].tolist(),
                    s2=tracker.s2(seed, rows_done, run.num_envs),
                    train_means=_window(host, trainer.metric_names, i),
                    retnorm={"lo": lo, "hi": hi,
                             "scale": max(config.agent.retnorm.limit, hi - lo)},
                    wall_s=wall))
                scal = {f"eval/{k}": recs[-1][k] for k in ("eval_mean", "eval_len_mean")}
                scal.update({f"train/{k}": v for k, v in recs[-1]["train"].items()
                             if v is not None})
                writer.add_scalars(seed, rows_done, scal)
            writer.add_records(recs)
            written += recs
            states = _reset_windows(states)
            last_eval = float(np.mean([r["eval_mean"] for r in recs]))
            if (log_index + 1) % run.checkpoint_every == 0 or log_index + 1 == num_logs:
                meta = {"config": config.to_dict(), "seeds": list(seeds),
                        "log_index": log_index, "rows": rows_done,
                        "updates": int(host["updates"][0]), "tracker": tracker.to_dict(),
                        "wall_s": wall}
                ckpt.save(out, log_index, states, meta)
            if bar is not None:
                bar.update(run.eval_every)
                bar.set_postfix(updates=int(host["updates"][0]), eval=f"{last_eval:.1f}")
    if bar is not None:
        bar.close()
    if primary:
        all_records = _read_jsonl(os.path.join(out, "records.jsonl"))
        plots.plot_curves(all_records, os.path.join(out, "curves.png"), env=run.env)
    ckpt.sync("dreamerjax_train_done")  # other processes wait for process 0's files
    return written


def _progress(enabled: bool, total: int, initial: int):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit="rows", dynamic_ncols=True)


def _episodes(ends, seeds, first_tick: int) -> list[dict]:
    """Episode ends [ticks, seeds, envs] (host arrays) -> episodes.jsonl rows. An episode
    finished by the env step of tick k ends on row k + 1 of its env (row 0 is the first
    reset row)."""
    ended = np.asarray(ends.ended)
    out = []
    for t, i, w in zip(*np.nonzero(ended), strict=False):
        out.append({
            "seed": int(seeds[i]), "worker": int(w), "row_last": int(first_tick + t + 1),
            "length": int(ends.length[t, i, w]), "score": float(ends.score[t, i, w]),
            "terminal": bool(ends.terminal[t, i, w]),
        })
    out.sort(key=lambda e: (e["seed"], e["row_last"], e["worker"]))
    return out


def _read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _truncate_logs(out: str, rows: int, num_envs: int) -> None:
    """On resume, drop log lines written after the checkpoint (a crash between the record
    write and the next checkpoint would otherwise duplicate them)."""
    keep_fn = {
        "records.jsonl": lambda x: x["rows"] <= rows,
        "episodes.jsonl": lambda x: x["row_last"] <= rows // num_envs,
    }
    for name, keep in keep_fn.items():
        path = os.path.join(out, name)
        if not os.path.exists(path):
            continue
        lines = [x for x in _read_jsonl(path) if keep(x)]
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            for x in lines:
                f.write(json.dumps(x) + "\n")
        os.replace(tmp, path)


# ----------------------------------------------------------------------------- CLI glue


def config_from_args(args) -> Config:
    kw = {}
    for name in ("steps", "eval_every", "eval_episodes", "num_envs", "train_ratio",
                 "checkpoint_every"):
        v = getattr(args, name, None)
        if v is not None:
            kw[name] = v
    return make_config(env=args.env, size=args.size, tiny=getattr(args, "tiny", False),
                       cnn_mults=getattr(args, "cnn_mults", None),
                       cnn_minres=getattr(args, "cnn_minres", None),
                       twohot_mean=getattr(args, "twohot_mean", None), **kw)


def train_cli(args) -> int:
    if getattr(args, "resume", None):
        out = args.resume
        with open(os.path.join(out, "config.json")) as f:
            saved = json.load(f)
        seeds = tuple(saved.pop("seeds"))
        from dreamerjax.config import from_dict
        config = from_dict(saved)
        if getattr(args, "steps", None):
            config = dataclasses.replace(
                config, run=dataclasses.replace(config.run, steps=args.steps))
        resume = True
    else:
        config, out, seeds, resume = config_from_args(args), args.out, tuple(args.seeds), False
    recs = train(config, seeds, out, resume=resume, devices=getattr(args, "devices", 1),
                 compile_cache=not getattr(args, "no_compile_cache", False))
    if recs:
        last = recs[-len(seeds):]
        print(json.dumps({"rows": last[0]["rows"], "updates": last[0]["updates"],
                          "eval_mean": [r["eval_mean"] for r in last]}))
    print(f"curves: {os.path.join(out, 'curves.png')}")
    return 0


def info_cli(args) -> int:
    config = config_from_args(args)
    setup = make_setup(config)
    params = jax.eval_shape(
        lambda k: agent_lib.init_params(k, config.agent, setup.spaces), jax.random.PRNGKey(0))
    print(config.to_json())
    counts = agent_lib.param_counts(params)
    print(f"Optimised variables: {counts.pop('total'):,}")
    for k, v in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{v:>12,}  {k}")
    return 0


def eval_cli(args) -> int:
    from dreamerjax import checkpoint as ckpt
    from dreamerjax.config import from_dict
    run_dir = args.run_dir
    with open(os.path.join(run_dir, "config.json")) as f:
        saved = json.load(f)
    seeds = tuple(saved.pop("seeds"))
    config = from_dict(saved)
    config = dataclasses.replace(
        config, run=dataclasses.replace(config.run, eval_episodes=args.episodes))
    setup = make_setup(config)
    trainer = Trainer(setup, seeds)
    found = ckpt.latest(run_dir)
    if found is None:
        raise ValueError(f"no checkpoint in {run_dir}")
    states = ckpt.restore(run_dir, found[0], trainer.init())
    rets, _ = trainer.evaluate(states, 10**6)
    for seed, r in zip(seeds, np.asarray(rets), strict=False):
        print(json.dumps({"seed": seed, "returns": r.tolist(), "mean": float(r.mean())}))
    return 0
