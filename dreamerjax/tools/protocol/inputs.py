"""Reading the comparison's inputs: a run's schedule (from its config.json) and record sets.

Record set = records.jsonl (one line per seed per log point, schema of section 5.1) plus
episodes.jsonl (one line per finished training episode). Two layouts are read: one
directory holding both files with a `seed` field per line, or per-seed subdirectories
`ref_s{s}/` (or `s{s}/`) each holding its own pair.

Our runs write records without the protocol's own fields (side, s2_logged, train_raw):
`as_ours` reads them as our side's, with nothing logged for S2 (S2 comes from
episodes.jsonl, statistics.s2_at) and the train metrics under the names logged. Record
sets that carry the fields (the reference harness's, earlier runs of ours) are read as
they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from dreamerjax.config.defaults import REF_29EB964
from dreamerjax.data import schedule as schedule_lib

CARTPOLE_LIMIT = 500
# The protocol's env through either path: gymnax's (compiled) or Gymnasium's (host).
CARTPOLE_ENVS = ("CartPole-v1", "gym_CartPole-v1")
# The record fields of the protocol's schema (section 5.1) beyond a run's own.
PROTOCOL_FIELDS = ("side", "s2_logged", "train_raw")
OUR_SIDE = "dreamerjax"


def is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class InputError(Exception):
    """A record set cannot be read at all (missing directory or file, bad JSON)."""


# ---------------------------------------------------------------------------------------
# Schedule: log points and expected update counts


@dataclass(frozen=True)
class Schedule:
    """The run settings that fix log points, update counts and the episode limit.

    train: the train-ratio schedule of dreamerjax.data.schedule (its gate and exact
    ratio), the one derivation of the update counts that training itself runs.
    """

    env: str
    num_envs: int
    steps: int
    eval_every: int
    eval_episodes: int
    train: schedule_lib.TrainSchedule
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
        return Fraction(self.train.ratio_num, self.train.ratio_den)

    @property
    def gate_step(self) -> int:
        """Row count at which the first update runs (1,040 for the protocol)."""
        return self.train.gate_rows

    def expected_updates(self, rows: int) -> int:
        """Updates run by the time `rows` rows were added (9,481 at 20,000 rows for the
        protocol)."""
        return schedule_lib.total_updates(self.train, int(rows))


# Keys of our config.json's `run` section the schedule needs; the others default.
_SCHEDULE_KEYS = ("env", "num_envs", "steps", "eval_every", "eval_episodes", "train_ratio",
                  "batch_size", "batch_length", "replay_context")


def schedule_of(run, reference: str = REF_29EB964) -> Schedule:
    """Schedule of a RunConfig (dreamerjax.config.defaults) or anything with its fields,
    with the replay gate of the reference version the run reproduces."""
    return Schedule(env=run.env, num_envs=run.num_envs, steps=run.steps,
                    eval_every=run.eval_every, eval_episodes=run.eval_episodes,
                    train=schedule_lib.schedule_from_config(run, reference),
                    episode_limit=run.episode_limit)


def schedule_from_config(cfg: dict) -> Schedule:
    """Schedule from our config.json (keys of dreamerjax.config.defaults.RunConfig under `run`)."""
    from dreamerjax.config.defaults import RunConfig

    run = cfg.get("run")
    if not isinstance(run, dict):
        raise InputError("config.json has no 'run' section")
    for key in _SCHEDULE_KEYS:
        if key not in run:
            raise InputError(f"config.json lacks run.{key}")
    known = {k: run[k] for k in (*_SCHEDULE_KEYS, "episode_limit", "train_fill") if k in run}
    # agent.reference: the version whose replay gate the run used (absent before HEAD).
    reference = (cfg.get("agent") or {}).get("reference", REF_29EB964)
    try:
        return schedule_of(RunConfig(**known), reference)
    except ValueError as e:
        raise InputError(f"config.json: {e}") from e


# ---------------------------------------------------------------------------------------
# Record sets


@dataclass(frozen=True)
class RecordSet:
    """One side's files. records/episodes: every line, in file order.

    plain: records that carried none of the protocol's fields (`as_ours` filled them in).
    """

    path: str
    layout: str  # "single" or "per_seed"
    records: tuple[dict, ...]
    episodes: tuple[dict, ...] | None  # None when no episodes file exists
    seed_dirs: tuple[tuple[int, str], ...] = ()  # (seed, dir) for the per-seed layout
    plain: int = 0

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
    return _load_per_seed(d, subdirs)


def _load_per_seed(d: Path, subdirs: list[tuple[int, Path]]) -> RecordSet:
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


def as_ours(rs: RecordSet) -> RecordSet:
    """Our run's record set, its records read as the protocol's.

    A record with none of PROTOCOL_FIELDS gets side "dreamerjax" and s2_logged None (S2
    is recomputed from episodes.jsonl either way; only a logged value is audited); its
    `train` already holds our metric names, which are the reference's. A record with some
    of the fields but not all is left as it is, for the schema check to name.
    """
    plain = [not any(k in r for k in PROTOCOL_FIELDS) for r in rs.records]
    if not any(plain):
        return rs
    records = tuple({"side": OUR_SIDE, "s2_logged": None, **r} if p else r
                    for r, p in zip(rs.records, plain, strict=True))
    return replace(rs, records=records, plain=sum(plain))
