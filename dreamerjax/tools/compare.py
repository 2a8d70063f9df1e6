"""The CartPole comparison harness: `dreamerjax compare RUN_DIR [--reference DIR]`.

Reads our run's record set and, when given, a reference record set, checks both against
the pre-registered protocol (../shared/seeds/000_*.txt, sections 5.1-5.4), computes its
statistics and writes compare.md, summary.json and curves.png.

Record set = records.jsonl (one line per seed per log point, schema of section 5.1) plus
episodes.jsonl (one line per finished training episode). Two layouts are read: one
directory holding both files with a `seed` field per line, or per-seed subdirectories
`ref_s{s}/` (or `s{s}/`) each holding its own pair. Our run directory also holds
config.json (the resolved `dreamerjax.config.defaults.Config`), which fixes the log points and
the expected update counts of both sides.

Statistics (section 5.2; fixed before any result existed):
  S1 per seed = mean eval_mean at 16,000 / 18,000 / 20,000 rows (smoke: last 3 log points).
  S2(N) per seed = (1/E) sum_w m_w over the E envs, m_w = mean score of env w's last
    min(10, k_w) episodes with row_last <= N / E; NaN unless every k_w >= 1.
  A = mean of our S1; [lo, hi] = [min, max] of the reference S1 (published 241-386 when no
    reference is given); LEARNS = A >= lo; WITHIN_RANGE = lo <= A <= hi.
The decision stays with the user: the exit code says only whether the inputs passed.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------------------------------
# Protocol constants
# ---------------------------------------------------------------------------------------

S1_ROWS_FULL = (16000, 18000, 20000)
S2_WINDOW = 10  # episodes per env in the S2 rolling mean (Ajax's per-env ring of 10)
# Round-1 reference runs of the protocol (3 seeds, stock 29eb964): S1 range (diagnosis 002).
PUBLISHED_REFERENCE_S1 = (241.0, 386.0)
PUBLISHED_SOURCE = (
    "published: S1 range of the round-1 reference runs of the protocol "
    "(danijar/dreamerv3 29eb964, seeds 0-2, stock two-hot decode), 241-386")
CARTPOLE_LIMIT = 500
# The protocol's env through either path: gymnax's (compiled) or Gymnasium's (host, issue 16).
CARTPOLE_ENVS = ("CartPole-v1", "gym_CartPole-v1")

# Section 1 "This run" values our config.json must hold in full mode (run.*, size, agent).
PROTOCOL_CONFIG: dict[str, Any] = {
    "size": "1m",
    "run.env": CARTPOLE_ENVS,
    "run.num_envs": 16,
    "run.train_ratio": 512.0,
    "run.batch_size": 16,
    "run.batch_length": 64,
    "run.replay_context": 1,
    "run.steps": 20000,
    "run.eval_every": 2000,
    "run.eval_episodes": 10,
    "agent.rssm.deter": 512,
    "agent.rssm.hidden": 64,
    "agent.rssm.classes": 4,
    "agent.rssm.stoch": 32,
    "agent.rssm.blocks": 8,
    "agent.enc.units": 64,
    "agent.dec.units": 64,
    "agent.rewhead.units": 64,
    "agent.conhead.units": 64,
    "agent.actor.units": 64,
    "agent.critic.units": 64,
    "agent.compute_dtype": "float32",  # the reference side runs float32 too (REF_YAML_RUN)
}
# Keys a config.json written before they existed lacks: their value then.
PROTOCOL_CONFIG_BEFORE = {"agent.compute_dtype": "float32"}

# Keys of a reference config.yaml (embodied Config.save, dreamerv3/main.py:54) checked when
# present: the overrides of section 1. Widths and steps only in full mode (smoke may be tiny).
REF_YAML_RUN = {
    "run.num_envs": 16, "run.train_ratio": 512.0, "batch_size": 16, "batch_length": 65,
    "replay_context": 1, "jax.compute_dtype": "float32", "jax.param_dtype": "float32",
}
REF_YAML_FULL = {
    "run.steps": 20000, "dyn.rssm.deter": 512, "dyn.rssm.hidden": 64, "dyn.rssm.classes": 4,
    "dyn.rssm.stoch": 32, "enc.simple.units": 64, "dec.simple.units": 64,
    "rewhead.units": 64, "conhead.units": 64, "actor.units": 64, "critic.units": 64,
}

# Section 5.4: Ajax train names that differ from the reference's (all others are shared).
AJAX_TO_REF = {
    "rec_loss": "vector_loss", "rec_loss_std": "vector_loss_std",
    "rew_loss": "reward_loss", "rew_loss_std": "reward_loss_std",
    "con_loss": "cont_loss", "con_loss_std": "cont_loss_std",
    "repval_loss": "replay_critic_loss", "repval_loss_std": "replay_critic_loss_std",
}
_STATS = ("mean", "std", "mag", "min", "max")
_FAMILIES = ("ent/action", "rand/action", "act/action", "adv", "rew", "weight", "val", "ret",
             "ret_normed", "replay_ret", "prior_ent", "post_ent")
# The compared (mapped) names of section 5.4, in its order, as reference train/<name> names.
MAPPED_NAMES: tuple[str, ...] = (
    *(f"{n}{s}" for n in ("vector_loss", "reward_loss", "cont_loss", "dyn_loss", "rep_loss",
                          "actor_loss", "critic_loss", "replay_critic_loss")
      for s in ("", "_std")),
    "opt_loss", "opt_grad_norm", "opt_update_norm", "opt_param_norm", "opt_grad_steps",
    *(f"{f}/{s}" for f in _FAMILIES for s in _STATS),
    "td_error", "ret_rate",
    *(f"{f}/{s}" for f in ("data_rew", "pred_rew") for s in ("max", "mean", "std")),
    "activation/embed",
)
RETNORM_NAMES = ("retnorm/lo", "retnorm/hi", "retnorm/scale")  # state at N, not window means

# Diagnosis 002, table "4000-row window": reference seeds 0-2 (stock decode, D22 noise) and
# the 3-seed vmapped Ajax program, whose two-hot decode is exact like ours. [min, max].
KNOWN_REF_4000 = {
    "ent/action/mean": (0.506, 0.518), "adv/std": (0.328, 0.339), "val/std": (0.052, 0.053),
    "rew/min": (-0.113, -0.111), "actor_loss": (0.161, 0.175), "critic_loss": (5.05, 5.30),
}
KNOWN_AJAX_EXACT_4000 = {
    "ent/action/mean": (0.449, 0.461), "adv/std": (0.267, 0.286), "val/std": (0.003, 0.003),
    "rew/min": (0.0, 0.0), "actor_loss": (0.146, 0.152), "critic_loss": (5.48, 5.63),
}
KNOWN_ROWS = 4000

KNOWN_SIDES = ("dreamerjax", "ref", "reference", "ajax")

TWOHOT_DIFFERENCE = {
    "exact": (
        "Two-hot expectation (D22): we decode the reward and critic two-hot distributions "
        "with the exact mirror-difference sum; the reference's jitted pair sum "
        "(jaxutils.py:226-243) is contracted into fused multiply-adds and adds per-element "
        "noise of std ~0.085 for the first ~1,500-2,500 updates at 1m, which widens its "
        "early ret/adv/val spread and raises its actor entropy at 4,000 rows by ~11% "
        "(diagnosis 002); early actor/critic statistics are therefore not comparable."),
    "pairsum": (
        "Two-hot expectation (D22): this run used --twohot-mean pairsum, the reference's own "
        "summation order (jaxutils.py:226-243). Its rounding noise comes from XLA's fused "
        "multiply-adds in each compiled program, so it is reproduced in kind and size, not "
        "bit for bit; the default (exact mirror difference) has none."),
}

KNOWN_DIFFERENCES = (
    ("Synchronous acting (U1/D1): we act with the parameters of the latest update and log the "
    "metrics of the current update; the reference's training actor lags by 1-2 vector steps "
    "(jaxagent.py:147-153, 188-192), its batches are prefetched one ahead, and its metric "
    "windows hold updates n0-1..n1-1 (jaxagent.py:199-202)."),
    ("Replay sampler seeds (U2/D2): our uniform sampler is seeded from the run seed; the "
    "reference's Uniform selector is seeded 0 in every run (embodied/replay/selectors.py:"
    "29-32), so the three reference seeds share one index stream and the reference S1 range "
    "comes from three not fully independent runs."),
    ("Update placement (U3/D3): all updates a tick owes run after that tick's 16 rows are "
    "added; the reference may run one between env w's and env w+1's adds "
    "(embodied/run/train.py:81-92). The update count at every log point is the same."),
    ("Report prefetch stream (section 6.1): the stock reference still builds its report "
    "dataset, whose prefetch thread takes up to 32 of the earliest online-queue items "
    "(around rows 1,025-1,100) away from training's online queue; we have no such stream."),
    ("RNG streams (U6): the two codebases draw from unrelated generators (JAX keys vs numpy "
    "Generators), so a seed value names an independent run, not the same draws."),
    ("Window means and NaN (5.4): the reference's Agg skips NaN values inside a window; a "
    "window listed below as non-finite means a NaN occurred in it, not a divergence."),
)


class InputError(Exception):
    """A record set cannot be read at all (missing directory or file, bad JSON)."""


# ---------------------------------------------------------------------------------------
# Schedule: log points and expected update counts
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """The run settings that fix log points, update counts and the episode limit."""

    env: str = "CartPole-v1"
    num_envs: int = 16
    steps: int = 20000
    eval_every: int = 2000
    eval_episodes: int = 10
    train_ratio: float = 512.0
    batch_size: int = 16
    batch_length: int = 64  # trained rows
    replay_context: int = 1
    episode_limit: int = 0  # 0 = the environment's own (500 for CartPole-v1)

    @property
    def log_points(self) -> tuple[int, ...]:
        return tuple(k * self.eval_every for k in range(1, self.steps // self.eval_every + 1))

    @property
    def rows_per_env(self) -> int:
        return self.steps // self.num_envs

    @property
    def limit(self) -> int:
        if self.episode_limit:
            return self.episode_limit
        return CARTPOLE_LIMIT if self.is_cartpole else 0

    @property
    def is_cartpole(self) -> bool:
        return self.env in CARTPOLE_ENVS

    @property
    def ratio(self) -> Fraction:
        """Updates per row: train_ratio / (batch_size * trained rows), exact."""
        return Fraction(self.train_ratio) / (self.batch_size * self.batch_length)

    @property
    def gate_step(self) -> int:
        """Row count at which the first update runs.

        The reference counts one step per transition, env 0..E-1 in turn
        (embodied/core/driver.py:76-78); env w's replay gets its first item with its
        (batch_length + context)-th row (embodied/replay/replay.py:130-138), one item per
        row after that, so the replay holds max(0, n - E * batch_length) items after n
        transitions, and training starts once it holds batch_size items
        (embodied/run/train.py:82). 16 * 64 + 16 = 1040 for the protocol.
        """
        return self.num_envs * (self.batch_length + self.replay_context - 1) + self.batch_size

    def expected_updates(self, rows: int) -> int:
        """Updates run by the time `rows` rows were added: 1 + floor((rows - t0) * ratio).

        when.Ratio (embodied/core/when.py:26-42) returns 1 at its first call (the gate
        step t0) and then keeps its credit exactly; 9,481 at 20,000 rows for the protocol.
        """
        t0 = self.gate_step
        if rows < t0 or self.ratio == 0:
            return 0
        return 1 + math.floor((rows - t0) * self.ratio)


def schedule_from_config(cfg: dict) -> Schedule:
    """Schedule from our config.json (keys of dreamerjax.config.defaults.RunConfig under `run`)."""
    run = cfg.get("run")
    if not isinstance(run, dict):
        raise InputError("config.json has no 'run' section")
    kwargs = {}
    for f in dataclasses.fields(Schedule):
        if f.name in run:
            kwargs[f.name] = run[f.name]
        elif f.name != "episode_limit":
            raise InputError(f"config.json lacks run.{f.name}")
    return Schedule(**kwargs)


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordSet:
    """One side's files. records/episodes: every line, in file order."""

    path: str
    layout: str  # "single" or "per_seed"
    records: tuple[dict, ...]
    episodes: tuple[dict, ...] | None  # None when no episodes file exists
    seed_dirs: tuple[tuple[int, str], ...] = ()  # (seed, dir) for the per-seed layout

    @property
    def side(self) -> str:
        sides = {r.get("side") for r in self.records}
        return sides.pop() if len(sides) == 1 else "mixed"


def read_jsonl(path: Path) -> list[dict]:
    """records.read_jsonl, its errors as InputError."""
    from dreamerjax.run.records import read_jsonl as read

    try:
        return read(path)
    except ValueError as e:
        raise InputError(str(e)) from e


def _find(directory: Path, names: tuple[str, ...]) -> Path | None:
    for name in names:
        for candidate in (directory / name, directory / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


_RECORD_FILES = ("records.jsonl", "ajax_records.jsonl")
_EPISODE_FILES = ("episodes.jsonl",)
_SEED_DIR = re.compile(r"^(?:ref_)?s(\d+)$")


def load_record_set(directory: str | Path) -> RecordSet:
    """Read a record set in either layout (module docstring)."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{d}: no such directory")
    rec = _find(d, _RECORD_FILES)
    if rec is not None:
        eps = _find(d, _EPISODE_FILES)
        return RecordSet(str(d), "single", tuple(read_jsonl(rec)),
                         None if eps is None else tuple(read_jsonl(eps)))
    subdirs = sorted(
        (int(m.group(1)), p) for p in d.iterdir()
        if p.is_dir() and (m := _SEED_DIR.match(p.name)))
    if not subdirs:
        raise InputError(f"{d}: neither records.jsonl nor ref_s<seed>/ subdirectories")
    records: list[dict] = []
    episodes: list[dict] | None = []
    for seed, sub in subdirs:
        rec = _find(sub, _RECORD_FILES)
        if rec is None:
            raise InputError(f"{sub}: no records.jsonl")
        # A per-seed file may omit the seed field: the directory name supplies it.
        records += [{"seed": seed, **r} for r in read_jsonl(rec)]
        eps = _find(sub, _EPISODE_FILES)
        if eps is None:
            episodes = None
        elif episodes is not None:
            episodes += [{"seed": seed, **e} for e in read_jsonl(eps)]
    return RecordSet(str(d), "per_seed", tuple(records),
                     None if episodes is None else tuple(episodes),
                     tuple((s, str(p)) for s, p in subdirs))


# ---------------------------------------------------------------------------------------
# Checks (section 5.3)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "pass", "fail" or "skip"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def _check(name: str, problems: list[str], ok_detail: str = "") -> Check:
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return Check(name, "fail", shown + more)
    return Check(name, "pass", ok_detail)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _finite(x: Any) -> bool:
    return _is_num(x) and math.isfinite(x)


def _close(a: float, b: float, rel: float = 1e-3) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(b))


def _dotted(tree: dict, key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def _same_value(actual: Any, expected: Any) -> bool:
    if isinstance(expected, tuple):  # any one of these
        return actual in expected
    if isinstance(expected, str):
        return actual == expected
    try:
        return float(actual) == float(expected)
    except (TypeError, ValueError):
        return False


def check_protocol_config(cfg: dict) -> Check:
    """Our config.json holds section 1's "This run" values (full mode only)."""
    problems = []
    for key, want in PROTOCOL_CONFIG.items():
        try:
            got = _dotted(cfg, key)
        except KeyError:
            if key not in PROTOCOL_CONFIG_BEFORE:
                problems.append(f"{key} missing")
                continue
            got = PROTOCOL_CONFIG_BEFORE[key]
        if not _same_value(got, want):
            problems.append(f"{key} = {got!r}, protocol {want!r}")
    run = cfg.get("run", {})
    cap, limit = run.get("replay_capacity", 0), run.get("episode_limit", 0)
    if cap and cap * run.get("num_envs", 1) < run.get("steps", 0):
        problems.append(f"run.replay_capacity = {cap} rows/env overwrites before the end")
    if limit not in (0, CARTPOLE_LIMIT):
        problems.append(f"run.episode_limit = {limit}, protocol 500 (the env's own)")
    return _check("protocol config (config.json, section 1)", problems)


_RECORD_SCHEMA: dict[str, tuple[str, ...]] = {
    # key: accepted kinds
    "side": ("str",), "seed": ("int",), "rows": ("int",), "updates": ("int",),
    "eval_mean": ("num",), "eval_len_mean": ("num",), "eval_returns": ("list", "null"),
    "s2_logged": ("num", "null"), "train": ("dict",), "retnorm": ("dict", "null"),
    "wall_s": ("num",),
}
_KIND = {
    "str": lambda v: isinstance(v, str), "int": _is_int, "num": _is_num,
    "list": lambda v: isinstance(v, list), "dict": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _record_problems(r: dict, side_role: str, sched: Schedule) -> list[str]:
    """Schema problems of one record; side_role 'ours' requires returns and retnorm."""
    where = f"seed {r.get('seed')} rows {r.get('rows')}"
    out = []
    for key, kinds in _RECORD_SCHEMA.items():
        if key not in r:
            out.append(f"{where}: '{key}' missing")
        elif not any(_KIND[k](r[key]) for k in kinds):
            out.append(f"{where}: '{key}' = {r[key]!r} is not {' or '.join(kinds)}")
    if out:
        return out
    if r["side"] not in KNOWN_SIDES:
        out.append(f"{where}: unknown side {r['side']!r}")
    returns = r["eval_returns"]
    needs_returns = side_role == "ours" or r["side"] != "ajax"
    if needs_returns and returns is None:
        out.append(f"{where}: eval_returns is null")
    if returns is not None:
        if len(returns) != sched.eval_episodes or not all(_finite(x) for x in returns):
            out.append(f"{where}: eval_returns has {len(returns)} entries (want "
                       f"{sched.eval_episodes} finite numbers)")
        elif not _close(r["eval_mean"], sum(returns) / len(returns)):
            out.append(f"{where}: eval_mean {r['eval_mean']} != mean(eval_returns)")
    if not _finite(r["eval_mean"]):
        out.append(f"{where}: eval_mean is not finite")
    if side_role == "ours" and r["retnorm"] is None:
        out.append(f"{where}: retnorm is null")
    if r["retnorm"] is not None and not all(_is_num(r["retnorm"].get(k))
                                            for k in ("lo", "hi", "scale")):
        out.append(f"{where}: retnorm needs numbers lo, hi, scale")
    bad = [k for k, v in r["train"].items() if not (v is None or _is_num(v))]
    if bad:
        out.append(f"{where}: train values not numbers: {bad[:3]}")
    return out


def check_schema(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    problems = [p for r in rs.records for p in _record_problems(r, side_role, sched)]
    if not problems and rs.side == "mixed":
        problems.append("records disagree on 'side'")
    return _check(f"{side_role}: record schema (5.1)", problems)


def check_eval_consistency(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    """CartPole: return = length, so eval_len_mean = eval_mean and returns lie in [0, 500]."""
    name = f"{side_role}: CartPole evaluation values"
    if not sched.is_cartpole:
        return Check(name, "skip", f"env {sched.env}")
    problems = []
    for r in rs.records:
        where = f"seed {r['seed']} rows {r['rows']}"
        if not _close(r["eval_len_mean"], r["eval_mean"]):
            problems.append(f"{where}: eval_len_mean {r['eval_len_mean']} != eval_mean")
        vals = r["eval_returns"] if r["eval_returns"] is not None else [r["eval_mean"]]
        if any(not 0 <= v <= sched.limit for v in vals):
            problems.append(f"{where}: a return outside [0, {sched.limit}]")
    return _check(name, problems)


def check_record_counts(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                        sched: Schedule) -> Check:
    """One record per seed per log point N = k * eval_every, k = 1 .. steps // eval_every."""
    want = list(sched.log_points)
    problems = []
    for s in seeds:
        rows = sorted(r["rows"] for r in rs.records if r["seed"] == s)
        if rows != want:
            missing = sorted(set(want) - set(rows))
            extra = sorted(set(rows) - set(want))
            dup = sorted({n for n in rows if rows.count(n) > 1})
            problems.append(f"seed {s}: {len(rows)} records, want {len(want)}"
                            + (f"; missing rows {missing}" if missing else "")
                            + (f"; unexpected rows {extra}" if extra else "")
                            + (f"; duplicate rows {dup}" if dup else ""))
    return _check(f"{side_role}: one record per seed per log point", problems,
                  f"{len(seeds)} seeds x {len(want)} log points")


def check_updates(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                  sched: Schedule) -> Check:
    problems = [
        f"seed {r['seed']} rows {r['rows']}: updates {r['updates']}, "
        f"expected {sched.expected_updates(r['rows'])}"
        for r in rs.records
        if r["seed"] in seeds and r["updates"] != sched.expected_updates(r["rows"])]
    last = sched.log_points[-1] if sched.log_points else 0
    return _check(f"{side_role}: updates = 1 + floor((N - {sched.gate_step}) * "
                  f"{sched.ratio}) for N >= {sched.gate_step}", problems,
                  f"{sched.expected_updates(last)} at {last} rows")


_EPISODE_SCHEMA = {"seed": _is_int, "worker": _is_int, "row_last": _is_int,
                   "length": _is_int, "score": _is_num,
                   "terminal": lambda v: isinstance(v, bool)}


def _episode_problems(eps: list[dict], seed: int, sched: Schedule) -> list[str]:
    """Episode-log consistency for one seed (schema already checked)."""
    out = []
    by_worker: dict[int, list[dict]] = {}
    for e in eps:
        by_worker.setdefault(e["worker"], []).append(e)
    max_row = sched.rows_per_env  # the last env step of the run yields row steps / E
    for w, wes in sorted(by_worker.items()):
        where = f"seed {seed} worker {w}"
        if not 0 <= w < sched.num_envs:
            out.append(f"{where}: worker outside 0..{sched.num_envs - 1}")
        prev = -1  # row_last of the previous episode; the first starts at row 0
        for e in sorted(wes, key=lambda e: e["row_last"]):
            tag = f"{where} row_last {e['row_last']}"
            if e["row_last"] - prev != e["length"] + 1:
                out.append(f"{tag}: episode of length {e['length']} does not tile from row "
                           f"{prev + 1} (an episode of L steps spans L + 1 rows)")
            prev = e["row_last"]
            if e["row_last"] > max_row:
                out.append(f"{tag}: beyond the run's last row {max_row}")
            if sched.is_cartpole:
                if abs(e["score"] - e["length"]) > 1e-6:
                    out.append(f"{tag}: score {e['score']} != length {e['length']}")
                if not 1 <= e["length"] <= sched.limit:
                    out.append(f"{tag}: length {e['length']} outside 1..{sched.limit}")
                if not e["terminal"] and e["length"] != sched.limit:
                    out.append(f"{tag}: not terminal at length {e['length']} "
                               f"(only a {sched.limit}-step time limit ends without it)")
    return out


def check_episodes(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                   sched: Schedule) -> Check:
    name = f"{side_role}: episode log consistency"
    if rs.episodes is None:
        if side_role == "reference" and rs.side == "ajax":
            return Check(name, "skip", "Ajax record set: S2 from s2_logged")
        return _check(name, ["episodes.jsonl missing"])
    problems = []
    for i, e in enumerate(rs.episodes):
        bad = [k for k, ok in _EPISODE_SCHEMA.items() if k not in e or not ok(e[k])]
        if bad:
            problems.append(f"episode line {i + 1}: bad or missing {bad}")
    if problems:
        return _check(name, problems)
    for s in seeds:
        eps = [e for e in rs.episodes if e["seed"] == s]
        if not eps:
            problems.append(f"seed {s}: no episodes")
        problems += _episode_problems(eps, s, sched)
    return _check(name, problems, f"{len(rs.episodes)} episodes")


def check_s2_audit(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                   sched: Schedule) -> Check:
    """Logged S2 (s2_logged) equals S2 recomputed from episodes.jsonl at every N."""
    name = f"{side_role}: s2_logged = S2 from episodes.jsonl"
    recs = [r for r in rs.records if r["seed"] in seeds]
    if rs.episodes is None or all(r["s2_logged"] is None for r in recs):
        return Check(name, "skip", "nothing to audit")
    problems = []
    for r in recs:
        eps = [e for e in rs.episodes if e["seed"] == r["seed"]]
        want = s2_at(eps, sched.num_envs, r["rows"])
        got = math.nan if r["s2_logged"] is None else float(r["s2_logged"])
        both_nan = math.isnan(got) and math.isnan(want)
        if not both_nan and not (math.isfinite(got) and math.isfinite(want)
                                 and _close(got, want)):
            problems.append(f"seed {r['seed']} rows {r['rows']}: logged {got}, "
                            f"recomputed {want}")
    return _check(name, problems)


def check_flush(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    """timing.json's flush_episodes = episodes with row_last = steps / E (when present)."""
    name = f"{side_role}: final flush step recorded"
    found = [(s, Path(d) / "timing.json") for s, d in rs.seed_dirs
             if (Path(d) / "timing.json").is_file()]
    if not found or rs.episodes is None:
        return Check(name, "skip", "no timing.json")
    problems = []
    for s, path in found:
        try:
            flush = json.loads(path.read_text()).get("flush_episodes")
        except (json.JSONDecodeError, AttributeError):
            flush = None
        n = sum(1 for e in rs.episodes
                if e["seed"] == s and e["row_last"] == sched.rows_per_env)
        if flush != n:
            problems.append(f"seed {s}: flush_episodes {flush!r}, {n} episodes end at row "
                            f"{sched.rows_per_env}")
    return _check(name, problems)


def check_done_markers(directory: str, side_role: str) -> Check:
    """Every *.DONE marker in the directory holds exit code 0 (launch wrappers)."""
    name = f"{side_role}: *.DONE exit codes"
    markers = sorted(Path(directory).glob("*.DONE"))
    if not markers:
        return Check(name, "skip", "no markers")
    bad = [f"{m.name} = {m.read_text().strip()!r}" for m in markers
           if m.read_text().strip() != "0"]
    return _check(name, bad)


def check_reference_yaml(rs: RecordSet, smoke: bool) -> Check:
    """A reference config.yaml (one per seed directory) holds section 1's overrides."""
    name = "reference: config.yaml overrides (section 1)"
    paths = [(s, Path(d) / "config.yaml") for s, d in rs.seed_dirs]
    paths = [(s, p) for s, p in paths if p.is_file()]
    if not paths:
        return Check(name, "skip", "no config.yaml")
    try:
        import yaml
    except ImportError:
        return Check(name, "skip", "pyyaml not installed")
    want = dict(REF_YAML_RUN) if smoke else {**REF_YAML_RUN, **REF_YAML_FULL}
    problems = []
    for s, p in paths:
        try:
            tree = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            problems.append(f"{p}: not YAML ({e})")
            continue
        for key, value in {"seed": s, **want}.items():
            try:
                got = _dotted(tree, key)
            except KeyError:
                problems.append(f"seed {s}: {key} missing")
                continue
            if not _same_value(got, value):
                problems.append(f"seed {s}: {key} = {got!r}, protocol {value!r}")
    return _check(name, problems)


def check_seeds_present(rs: RecordSet, side_role: str, seeds: tuple[int, ...]) -> Check:
    have = {r.get("seed") for r in rs.records}
    missing = [s for s in seeds if s not in have]
    return _check(f"{side_role}: requested seeds present",
                  [f"seed {s} has no records" for s in missing], f"seeds {list(seeds)}")


def side_checks(rs: RecordSet, side_role: str, seeds: tuple[int, ...], sched: Schedule,
                smoke: bool) -> list[Check]:
    """All checks of one side; later checks run only on a schema-valid set."""
    checks = [check_done_markers(rs.path, side_role), check_seeds_present(rs, side_role, seeds),
              check_schema(rs, side_role, sched)]
    if any(c.failed for c in checks):
        return checks
    checks += [
        check_record_counts(rs, side_role, seeds, sched),
        check_updates(rs, side_role, seeds, sched),
        check_eval_consistency(rs, side_role, sched),
        check_episodes(rs, side_role, seeds, sched),
    ]
    if not checks[-1].failed:
        checks += [check_s2_audit(rs, side_role, seeds, sched),
                   check_flush(rs, side_role, sched)]
    if smoke and len(sched.log_points) < 3:
        checks.append(Check(f"{side_role}: smoke needs 3 log points", "fail",
                            f"only {len(sched.log_points)}"))
    return checks


# ---------------------------------------------------------------------------------------
# S2 while a run trains: the protocol's record fields, attached as a driver callback


class EpisodeTracker:
    """Finished training episodes per seed and env, and the S2 statistic over them.

    Episodes are identified by row_last, the 0-based per-env row index of the episode's
    is_last row. Per env they must arrive in completion order (strictly increasing
    row_last). State is plain lists, serialisable with to_dict / from_dict.
    """

    def __init__(self) -> None:
        # seed -> worker -> ([row_last ...], [score ...]), both in completion order.
        self._episodes: dict[int, dict[int, tuple[list[int], list[float]]]] = {}

    def add(self, seed: int, worker: int, row_last: int, length: int, score: float,
            terminal: bool) -> None:
        """Record one finished episode. length / terminal are accepted for symmetry with
        episodes.jsonl; S2 needs only row_last and score."""
        del length, terminal
        rows, scores = self._episodes.setdefault(int(seed), {}).setdefault(
            int(worker), ([], []))
        row_last = int(row_last)
        if rows and row_last <= rows[-1]:
            raise ValueError(
                f"EpisodeTracker.add: seed {seed} worker {worker}: row_last {row_last} is "
                f"not after the previous episode's {rows[-1]} (episodes must come in "
                "completion order)")
        rows.append(row_last)
        scores.append(float(score))

    def add_rows(self, rows: Iterable[Mapping]) -> None:
        """Add episodes.jsonl-style dicts."""
        for r in rows:
            self.add(r["seed"], r["worker"], r["row_last"], r.get("length", 0), r["score"],
                     r.get("terminal", False))

    def seeds(self) -> list[int]:
        return sorted(self._episodes)

    def count(self, seed: int, worker: int) -> int:
        return len(self._episodes.get(int(seed), {}).get(int(worker), ([], []))[0])

    def s2(self, seed: int, n_rows: int, num_envs: int) -> float:
        """S2(N) of one seed (protocol 5.2), N = n_rows total rows of the seed.

        For env w, E_w = its episodes with row_last <= N / num_envs (inclusive: the
        episode ending in row N / num_envs is finished by the env step of tick
        N / num_envs - 1, the last tick before the log point); m_w = the mean score of
        the last min(10, |E_w|) of them; S2 = mean over the num_envs envs of m_w, or NaN
        if any env has no such episode.
        """
        if n_rows % num_envs:
            raise ValueError(f"n_rows {n_rows} is not a multiple of num_envs {num_envs}")
        limit = n_rows // num_envs
        per_env = self._episodes.get(int(seed), {})
        means = []
        for w in range(num_envs):
            rows, scores = per_env.get(w, ([], []))
            k = bisect.bisect_right(rows, limit)
            if k == 0:
                return math.nan
            window = scores[max(0, k - S2_WINDOW):k]
            means.append(sum(window) / len(window))
        return math.fsum(means) / len(means)

    def s2_by_seed(self, n_rows: int, num_envs: int, seeds: Iterable[int]
                   ) -> dict[int, float]:
        return {int(s): self.s2(s, n_rows, num_envs) for s in seeds}

    def prune(self, n_rows: int, num_envs: int) -> None:
        """Forget episodes no query at N' >= n_rows can need (keeps state small).

        Per env, of the episodes with row_last <= n_rows / num_envs only the last 10 stay.
        """
        limit = n_rows // num_envs
        for per_env in self._episodes.values():
            for w, (rows, scores) in per_env.items():
                k = bisect.bisect_right(rows, limit)
                drop = max(0, k - S2_WINDOW)
                if drop:
                    per_env[w] = (rows[drop:], scores[drop:])

    def to_dict(self) -> dict:
        """JSON-ready state: {"seeds": {seed: {worker: [[row_last...], [score...]]}}}."""
        return {"seeds": {str(s): {str(w): [list(r), list(sc)] for w, (r, sc) in d.items()}
                          for s, d in self._episodes.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> EpisodeTracker:
        tracker = cls()
        for s, per_env in d.get("seeds", {}).items():
            tracker._episodes[int(s)] = {
                int(w): ([int(r) for r in rows], [float(x) for x in scores])
                for w, (rows, scores) in per_env.items()}
        return tracker


class ProtocolFields:
    """Driver callback adding the protocol's record fields (section 5.1) to every record:
    side "dreamerjax", s2_logged (S2 at the log point, from the training episodes seen so
    far) and train_raw (the metric names as logged; ours are the reference's). Its state
    (the episode tracker, pruned) travels in the checkpoint, so a resumed run logs the
    same S2."""

    name = "protocol"

    def __init__(self) -> None:
        self.tracker = EpisodeTracker()

    def on_log(self, point) -> None:
        self.tracker.add_rows(point.episodes)
        for r in point.records:
            r["side"] = "dreamerjax"
            r["s2_logged"] = _finite_or_none(
                self.tracker.s2(r["seed"], point.rows, point.num_envs))
            r["train_raw"] = dict(r["train"])
        self.tracker.prune(point.rows, point.num_envs)

    def state_dict(self) -> dict:
        return self.tracker.to_dict()

    def load_state_dict(self, state) -> None:
        self.tracker = EpisodeTracker.from_dict(state)


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------------------------------
# Statistics (section 5.2)
# ---------------------------------------------------------------------------------------


def s2_at(episodes: list[dict], num_envs: int, rows: int, window: int = S2_WINDOW) -> float:
    """S2(N) of one seed: mean over envs of the mean score of each env's last `window`
    finished episodes with row_last <= N / num_envs; NaN unless every env has one.

    episodes: one seed's episode lines (worker, row_last, score).
    """
    total = 0.0
    for w in range(num_envs):
        done = sorted((e for e in episodes
                       if e["worker"] == w and e["row_last"] * num_envs <= rows),
                      key=lambda e: e["row_last"])
        if not done:
            return math.nan
        last = done[-window:]
        total += sum(e["score"] for e in last) / len(last)
    return total / num_envs


def s1_rows(sched: Schedule, smoke: bool) -> tuple[int, ...]:
    return sched.log_points[-3:] if smoke else S1_ROWS_FULL


def s1_per_seed(rs: RecordSet, seeds: tuple[int, ...], rows: tuple[int, ...]) -> dict[int, float]:
    """Mean eval_mean over the S1 log points, per seed."""
    out = {}
    for s in seeds:
        vals = {r["rows"]: r["eval_mean"] for r in rs.records if r["seed"] == s}
        out[s] = sum(float(vals[n]) for n in rows) / len(rows)
    return out


def curves(rs: RecordSet, seeds: tuple[int, ...], sched: Schedule) -> dict[int, dict]:
    """Per seed: {'rows': [...], 'eval_mean': [...], 's2': [...]} at every log point.

    S2 comes from episodes.jsonl when present, else from s2_logged (an Ajax record set).
    """
    out = {}
    for s in seeds:
        recs = sorted((r for r in rs.records if r["seed"] == s), key=lambda r: r["rows"])
        if rs.episodes is not None:
            eps = [e for e in rs.episodes if e["seed"] == s]
            s2 = [s2_at(eps, sched.num_envs, r["rows"]) for r in recs]
        else:
            s2 = [math.nan if r["s2_logged"] is None else float(r["s2_logged"]) for r in recs]
        out[s] = {"rows": [r["rows"] for r in recs],
                  "eval_mean": [float(r["eval_mean"]) for r in recs], "s2": s2}
    return out


@dataclass(frozen=True)
class Decision:
    A: float
    lo: float
    hi: float

    @property
    def learns(self) -> bool:
        return self.A >= self.lo

    @property
    def within_range(self) -> bool:
        return self.lo <= self.A <= self.hi


def decide(ours_s1: dict[int, float], ref_s1: dict[int, float] | None) -> Decision:
    a = sum(ours_s1.values()) / len(ours_s1)
    if ref_s1 is None:
        return Decision(a, *PUBLISHED_REFERENCE_S1)
    return Decision(a, min(ref_s1.values()), max(ref_s1.values()))


# ---------------------------------------------------------------------------------------
# Training-metric windows (section 5.4)
# ---------------------------------------------------------------------------------------


def train_metrics(record: dict) -> dict[str, float]:
    """One record's window means under reference names (NaN for null).

    A reference record of the original protocol keeps its native names in train_raw (its
    `train` uses Ajax names); an Ajax record uses Ajax names; ours uses reference names.
    The retnorm state at N is added as retnorm/{lo,hi,scale}.
    """
    if record.get("side") in ("ref", "reference") and isinstance(record.get("train_raw"), dict):
        raw = record["train_raw"]
    else:
        raw = record["train"]
    out = {}
    for k, v in raw.items():
        if k.endswith("/dist") or k == "n_updates":
            continue
        out[AJAX_TO_REF.get(k, k)] = math.nan if v is None else float(v)
    if isinstance(record.get("retnorm"), dict):
        for k in ("lo", "hi", "scale"):
            v = record["retnorm"].get(k)
            if _is_num(v):
                out[f"retnorm/{k}"] = float(v)
    return out


@dataclass(frozen=True)
class Summary3:
    """Mean / min / max over the seeds' finite values; n_bad = non-finite seeds."""

    mean: float
    lo: float
    hi: float
    n_bad: int


def window_table(rs: RecordSet, seeds: tuple[int, ...]) -> dict[int, dict[str, Summary3]]:
    """{rows: {name: Summary3 over seeds}} for every name of the mapped list present."""
    by_rows: dict[int, dict[str, list[float]]] = {}
    for r in rs.records:
        if r["seed"] not in seeds:
            continue
        slot = by_rows.setdefault(r["rows"], {})
        for k, v in train_metrics(r).items():
            slot.setdefault(k, []).append(v)
    out: dict[int, dict[str, Summary3]] = {}
    for n, metrics in sorted(by_rows.items()):
        out[n] = {}
        for k, vals in metrics.items():
            good = [v for v in vals if math.isfinite(v)]
            bad = len(vals) - len(good)
            if good:
                out[n][k] = Summary3(sum(good) / len(good), min(good), max(good), bad)
            else:
                out[n][k] = Summary3(math.nan, math.nan, math.nan, bad)
    return out


def nonfinite_windows(rs: RecordSet, seeds: tuple[int, ...]) -> list[str]:
    out = []
    for r in sorted(rs.records, key=lambda r: (r["seed"], r["rows"])):
        if r["seed"] in seeds:
            bad = sorted(k for k, v in train_metrics(r).items() if not math.isfinite(v))
            if bad:
                out.append(f"seed {r['seed']} rows {r['rows']}: {', '.join(bad)}")
    return out


def table_names(tables: list[dict[int, dict[str, Summary3]]]) -> list[str]:
    """Mapped names present on any side, in section 5.4's order, then retnorm."""
    present = {k for t in tables for w in t.values() for k in w}
    return [n for n in (*MAPPED_NAMES, *RETNORM_NAMES) if n in present]


# ---------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------


def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "nan"
    return f"{x:.{digits}g}"


def _fmt1(x: float) -> str:
    return f"{x:.1f}" if math.isfinite(x) else "nan"


def _cell(s: Summary3 | None) -> str:
    if s is None:
        return "-"
    text = f"{_fmt(s.mean)} [{_fmt(s.lo)}, {_fmt(s.hi)}]"
    return text + (f" ({s.n_bad} nan)" if s.n_bad else "")


def _jsonable(x: Any) -> Any:
    """Strict JSON: non-finite floats become null; dict keys become strings."""
    from dreamerjax.run.records import to_jsonable
    return to_jsonable(x)


@dataclass(frozen=True)
class Side:
    """Everything the report needs of one side."""

    label: str
    rs: RecordSet
    seeds: tuple[int, ...]
    s1: dict[int, float]
    curves: dict[int, dict]
    windows: dict[int, dict[str, Summary3]]

    def s2_final(self) -> dict[int, float]:
        return {s: c["s2"][-1] for s, c in self.curves.items()}


def build_side(label: str, rs: RecordSet, seeds: tuple[int, ...], sched: Schedule,
               smoke: bool) -> Side:
    return Side(label, rs, seeds, s1_per_seed(rs, seeds, s1_rows(sched, smoke)),
                curves(rs, seeds, sched), window_table(rs, seeds))


def plot_curves(path: Path, ours: Side, ref: Side | None, band: tuple[float, float],
                s1_window: tuple[int, ...]) -> None:
    """Eval and S2 curves, per seed (thin) and mean over seeds (thick), both sides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    sides = [(ours, "tab:blue")] + ([(ref, "tab:orange")] if ref is not None else [])
    for ax, key, title in ((axes[0], "eval_mean", "evaluation return (10 episodes)"),
                           (axes[1], "s2", "S2: training episode return (last 10 per env)")):
        for side, color in sides:
            rows = next(iter(side.curves.values()))["rows"]
            for c in side.curves.values():
                ax.plot(c["rows"], c[key], color=color, alpha=0.35, lw=1)
            mean = [_nanmean([c[key][i] for c in side.curves.values()])
                    for i in range(len(rows))]
            ax.plot(rows, mean, color=color, lw=2.5, label=f"{side.label} (mean of "
                    f"{len(side.seeds)} seeds)")
        if key == "eval_mean":
            ax.axhspan(*band, xmin=0, xmax=1, color="tab:orange", alpha=0.12,
                       label=f"reference S1 range [{band[0]:g}, {band[1]:g}]")
            a = _nanmean(list(ours.s1.values()))
            ax.plot([s1_window[0], s1_window[-1]], [a, a], color="black", lw=2, ls="--",
                    label=f"A = {a:.1f} (our mean S1)")
            for n in s1_window:
                ax.axvline(n, color="gray", lw=0.5, ls=":")
        ax.set_xlim(0, max(s1_window) * 1.02)
        ax.set_title(title)
        ax.set_xlabel("rows (env steps, all envs)")
        ax.set_ylim(0, CARTPOLE_LIMIT * 1.05)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _nanmean(vals: list[float]) -> float:
    good = [v for v in vals if math.isfinite(v)]
    return sum(good) / len(good) if good else math.nan


def _seed_table(side: Side, s1_window: tuple[int, ...], final_rows: int) -> list[str]:
    head = " | ".join(f"eval@{n}" for n in s1_window)
    lines = [f"| seed | S1 | S2({final_rows}) | {head} |",
             "|---:|---:|---:|" + "---:|" * len(s1_window)]
    for s in side.seeds:
        c = side.curves[s]
        evals = " | ".join(_fmt1(c["eval_mean"][c["rows"].index(n)]) for n in s1_window)
        lines.append(f"| {s} | {_fmt1(side.s1[s])} | {_fmt1(side.s2_final()[s])} | {evals} |")
    s1m = _nanmean(list(side.s1.values()))
    s2m = _nanmean(list(side.s2_final().values()))
    lines.append(f"| mean | {_fmt1(s1m)} | {_fmt1(s2m)} |" + " |" * len(s1_window))
    return lines


def _curve_table(sides: list[Side]) -> list[str]:
    head = " | ".join(f"{s.label} eval | {s.label} S2" for s in sides)
    lines = [f"| rows | {head} |", "|---:|" + "---:|---:|" * len(sides)]
    rows = next(iter(sides[0].curves.values()))["rows"]
    for i, n in enumerate(rows):
        cells = []
        for side in sides:
            cells.append(_fmt1(_nanmean([c["eval_mean"][i] for c in side.curves.values()])))
            cells.append(_fmt1(_nanmean([c["s2"][i] for c in side.curves.values()])))
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return lines


def _range(r: tuple[float, float]) -> str:
    return _fmt(r[0]) if r[0] == r[1] else f"{_fmt(r[0])} to {_fmt(r[1])}"


def _metrics_section(ours: Side, ref: Side | None) -> list[str]:
    tables = [ours.windows] + ([ref.windows] if ref is not None else [])
    names = table_names(tables)
    known_names = names + [k for k in KNOWN_REF_4000 if k not in names]
    lines = ["## Training metrics per window", "",
             ("Window means over the updates between consecutive log points (section 5.4 "
             "names, reference spelling), mean over seeds with [min, max]; retnorm/* are "
             "the normaliser's state at N. Early actor/critic statistics are affected by "
             "D22 (see Known differences).")]
    if ref is None:
        lines += ["", (f"No reference record set: the {KNOWN_ROWS}-row table adds the "
                  "reference values known from the diagnosis of the round-1 runs (seeds 0-2, "
                  "stock decode), marked 'ref (diagnosis)', and the same diagnosis's "
                  "3-seed Ajax program with an exact decode like ours, marked "
                  "'exact decode (diagnosis)'. Known values only; not a measured reference.")]
    for n in sorted(ours.windows):
        lines += ["", f"### {n} rows", ""]
        known = ref is None and n == KNOWN_ROWS
        if ref is not None:
            lines += [f"| metric | {ours.label} | {ref.label} |", "|---|---|---|"]
        elif known:
            lines += [f"| metric | {ours.label} | ref (diagnosis) | exact decode (diagnosis) |",
                      "|---|---|---|---|"]
        else:
            lines += [f"| metric | {ours.label} |", "|---|---|"]
        for name in known_names if known else names:
            row = f"| {name} | {_cell(ours.windows[n].get(name))} |"
            if ref is not None:
                row += f" {_cell(ref.windows.get(n, {}).get(name))} |"
            elif known:
                k1, k2 = KNOWN_REF_4000.get(name), KNOWN_AJAX_EXACT_4000.get(name)
                row += f" {_range(k1) if k1 else '-'} | {_range(k2) if k2 else '-'} |"
            lines.append(row)
    return lines


def write_report(out: Path, ours: Side, ref: Side | None, dec: Decision, source: str,
                 checks: list[Check], smoke: bool, sched: Schedule,
                 twohot_mean: str = "exact") -> None:
    s1_window = s1_rows(sched, smoke)
    final_rows = sched.log_points[-1]
    lines = ["# CartPole protocol comparison", "",
             f"- run: `{ours.rs.path}` (side {ours.rs.side}, seeds {list(ours.seeds)})",
             f"- env: `{sched.env}`"
             + (" (Gymnasium, host path)" if sched.env.startswith("gym_") else ""),
             f"- reference: {source}",
             f"- mode: {'smoke (S1 = last three log points)' if smoke else 'full protocol'}",
             f"- two-hot expectation: {twohot_mean}"
             + (" (default)" if twohot_mean == "exact" else " (the reference's order; D1)"),
             "", "## Result", "",
             ("Reported rule (section 5.2; the decision is the user's): A = mean over our "
             f"seeds of S1 (mean eval return at {', '.join(map(str, s1_window))} rows); "
             "[lo, hi] = [min, max] of the reference seeds' S1. LEARNS = A >= lo; "
             "WITHIN_RANGE = lo <= A <= hi."), "",
             "| A | lo | hi | LEARNS | WITHIN_RANGE |", "|---:|---:|---:|:---:|:---:|",
             (f"| {_fmt1(dec.A)} | {_fmt1(dec.lo)} | {_fmt1(dec.hi)} | {dec.learns} | "
             f"{dec.within_range} |")]
    if ref is None:
        lines += ["", ("No --reference given: lo and hi are the published reference range "
                  f"S1 in [{dec.lo:g}, {dec.hi:g}] (round-1 reference runs of this protocol); "
                  "no per-seed reference table.")]
    lines += ["", f"## S1 and S2({final_rows}) per seed", "", f"### {ours.label}", "",
              *_seed_table(ours, s1_window, final_rows)]
    if ref is not None:
        lines += ["", f"### {ref.label}", "", *_seed_table(ref, s1_window, final_rows)]
    lines += ["", "## Curves", "", "![eval and S2 curves](curves.png)", "",
              ("Mean over seeds at every log point (S2 NaN until every env has finished an "
              "episode)."), "", *_curve_table([ours] + ([ref] if ref else []))]
    lines += ["", *_metrics_section(ours, ref)]
    bad_windows = nonfinite_windows(ours.rs, ours.seeds)
    differences = (TWOHOT_DIFFERENCE.get(twohot_mean, TWOHOT_DIFFERENCE["exact"]),
                   *KNOWN_DIFFERENCES)
    lines += ["", "## Known differences", "", *(f"- {d}" for d in differences)]
    lines += ["", f"Non-finite window means in our run: {len(bad_windows) or 'none'}"]
    lines += [f"- {w}" for w in bad_windows]
    lines += ["", "## Input checks", "", *(f"- {c.status}: {c.name}"
                                            + (f" ({c.detail})" if c.detail else "")
                                            for c in checks), ""]
    (out / "compare.md").write_text("\n".join(lines))


def write_failure_report(out: Path, run_dir: str, checks: list[Check]) -> None:
    lines = ["# CartPole protocol comparison: INPUT CHECKS FAILED", "",
             f"- run: `{run_dir}`", "", "No statistics were computed.", "",
             *(f"- {c.status}: {c.name}" + (f" ({c.detail})" if c.detail else "")
               for c in checks), ""]
    (out / "compare.md").write_text("\n".join(lines))


def summary_dict(ours: Side | None, ref: Side | None, dec: Decision | None, source: str,
                 checks: list[Check], smoke: bool) -> dict:
    return _jsonable({
        "A": dec.A if dec else None,
        "lo": dec.lo if dec else None,
        "hi": dec.hi if dec else None,
        "LEARNS": dec.learns if dec else None,
        "WITHIN_RANGE": dec.within_range if dec else None,
        "reference_source": source,
        "mode": "smoke" if smoke else "full",
        "seeds": list(ours.seeds) if ours else None,
        "S1": ours.s1 if ours else None,
        "S2_final": ours.s2_final() if ours else None,
        "reference_seeds": list(ref.seeds) if ref else None,
        "reference_S1": ref.s1 if ref else None,
        "reference_S2_final": ref.s2_final() if ref else None,
        "curves": {"ours": ours.curves if ours else None,
                   "reference": ref.curves if ref else None},
        "nonfinite_windows": nonfinite_windows(ours.rs, ours.seeds) if ours else None,
        "checks": [dataclasses.asdict(c) for c in checks],
    })


def _print_result(ours: Side, ref: Side | None, dec: Decision, source: str) -> None:
    print(f"A = {dec.A:.1f}  lo = {dec.lo:.1f}  hi = {dec.hi:.1f}  LEARNS = {dec.learns}  "
          f"WITHIN_RANGE = {dec.within_range}")
    print(f"reference: {source}")
    for side in [ours] + ([ref] if ref else []):
        s2 = side.s2_final()
        for s in side.seeds:
            print(f"  {side.label} seed {s}: S1 = {side.s1[s]:.1f}  S2_final = {s2[s]:.1f}")


# ---------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------


def _seeds_of(rs: RecordSet, seeds: tuple[int, ...] | None) -> tuple[int, ...]:
    if seeds is not None:
        return tuple(seeds)
    return tuple(sorted({r["seed"] for r in rs.records if _is_int(r.get("seed"))}))


def compare_main(run_dir: str, reference: str | None = None, out: str | None = None,
                 seeds: tuple[int, ...] | None = None, smoke: bool = False) -> int:
    """Check both record sets, then write compare.md, summary.json and curves.png.

    Returns 0 when every input check passed (whatever LEARNS says), 1 when a check failed
    (the report then lists the checks only), 2 when an input cannot be read at all.
    """
    out_dir = Path(out if out is not None else run_dir)
    source = PUBLISHED_SOURCE if reference is None else f"record set {reference}"
    try:
        cfg_path = Path(run_dir) / "config.json"
        if not cfg_path.is_file():
            raise InputError(f"{cfg_path}: missing")
        cfg = json.loads(cfg_path.read_text())
        sched = schedule_from_config(cfg)
        ours_rs = load_record_set(run_dir)
        ref_rs = load_record_set(reference) if reference is not None else None
    except (InputError, json.JSONDecodeError, TypeError) as e:
        print(f"compare: cannot read the inputs: {e}", file=sys.stderr)
        return 2

    ours_seeds = _seeds_of(ours_rs, seeds)
    checks = [] if smoke else [check_protocol_config(cfg)]
    checks += side_checks(ours_rs, "ours", ours_seeds, sched, smoke)
    ref_seeds: tuple[int, ...] = ()
    if ref_rs is not None:
        ref_seeds = _seeds_of(ref_rs, seeds)
        checks += side_checks(ref_rs, "reference", ref_seeds, sched, smoke)
        if ref_rs.layout == "per_seed":
            checks.append(check_reference_yaml(ref_rs, smoke))
    if not ours_seeds or (ref_rs is not None and not ref_seeds):
        checks.append(Check("seeds to compare", "fail", "a side has no seeds"))

    out_dir.mkdir(parents=True, exist_ok=True)
    failed = [c for c in checks if c.failed]
    if failed:
        for c in failed:
            print(f"compare: check failed: {c.name}: {c.detail}", file=sys.stderr)
        write_failure_report(out_dir, run_dir, checks)
        (out_dir / "summary.json").write_text(
            json.dumps(summary_dict(None, None, None, source, checks, smoke), indent=2))
        return 1

    ours = build_side("dreamerjax", ours_rs, ours_seeds, sched, smoke)
    ref = None
    if ref_rs is not None:
        label = ("reference" if ref_rs.side in ("ref", "reference")
                 else f"reference ({ref_rs.side})")
        ref = build_side(label, ref_rs, ref_seeds, sched, smoke)
    dec = decide(ours.s1, ref.s1 if ref else None)
    plot_curves(out_dir / "curves.png", ours, ref, (dec.lo, dec.hi), s1_rows(sched, smoke))
    write_report(out_dir, ours, ref, dec, source, checks, smoke, sched,
                 (cfg.get("agent") or {}).get("twohot_mean", "exact"))
    (out_dir / "summary.json").write_text(
        json.dumps(summary_dict(ours, ref, dec, source, checks, smoke), indent=2))
    _print_result(ours, ref, dec, source)
    print(f"compare: wrote {out_dir / 'compare.md'}, summary.json, curves.png")
    return 0
