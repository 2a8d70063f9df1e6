"""Host-side run records: JSONL files, TensorBoard scalars, the S2 episode statistic.

A run directory holds

    config.json      the resolved config (sorted keys, indented)
    records.jsonl    one line per seed per log point (protocol section 5.1)
    episodes.jsonl   one line per finished training episode
    tb/seed_{s}/     TensorBoard event files, one writer per seed
    checkpoints/     see checkpoint.py

Every JSON value written here is strict JSON: NaN and +-inf become null, numpy and JAX
scalars become Python numbers. Lines are flushed and fsynced on every call, so a crash
loses nothing already handed to the writer; `positions()` records how far the files go so
a resumed run can cut off what was written after its checkpoint.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

RECORDS_FILE = "records.jsonl"
EPISODES_FILE = "episodes.jsonl"
CONFIG_FILE = "config.json"
TB_DIR = "tb"

# S2 window: the last 10 finished episodes of each env (protocol 5.2; the Ajax ring of
# row_collector.py:211, 235-239).
S2_WINDOW = 10


# ---------------------------------------------------------------------------------------
# JSON helpers


def to_jsonable(value: Any) -> Any:
    """A copy of `value` that json.dumps(allow_nan=False) accepts.

    Non-finite floats -> None; numpy / JAX scalars and arrays -> Python numbers and lists;
    tuples -> lists; mapping keys -> str.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "__array__") or isinstance(value, np.generic):
        arr = np.asarray(value)
        if arr.ndim == 0:
            item = arr.item()
            return to_jsonable(item)
        return [to_jsonable(v) for v in arr.tolist()]
    raise TypeError(f"Cannot write {type(value).__name__} to JSON: {value!r}")


def dumps(value: Any, **kwargs) -> str:
    """Strict JSON text of `value` (non-finite floats as null)."""
    return json.dumps(to_jsonable(value), allow_nan=False, **kwargs)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """All objects of a JSONL file; a missing file reads as empty.

    A last line without its newline (a write cut short by a crash) is ignored.
    """
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    return read_jsonl(Path(run_dir) / RECORDS_FILE)


def read_episodes(run_dir: str | os.PathLike) -> list[dict]:
    return read_jsonl(Path(run_dir) / EPISODES_FILE)


def _float_or_none(x: Any) -> float | None:
    if x is None:
        return None
    x = float(np.asarray(x))
    return x if math.isfinite(x) else None


def _count_or_none(x: Any) -> int | float | None:
    """An episode length: int when whole (lengths are counts), else as a float."""
    x = _float_or_none(x)
    return int(x) if x is not None and x.is_integer() else x


def _mean_or_none(values: Iterable) -> float | None:
    arr = np.asarray(list(values), np.float64)
    if arr.size == 0:
        return None
    return _float_or_none(arr.mean())


def flatten(d: Mapping, sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a/b': 1}: nested mappings to one level of joined keys."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, sep, key + sep))
        else:
            out[key] = v
    return out


# ---------------------------------------------------------------------------------------
# Record rows


def record_row(
    side: str,
    seed: int,
    rows: int,
    updates: int,
    eval_returns: Iterable[float] | None,
    eval_lengths: Iterable[float] | None,
    s2: float | None,
    train_means: Mapping[str, float | None],
    retnorm: Mapping[str, float] | None,
    wall_s: float,
    train_raw: Mapping[str, float | None] | None = None,
) -> dict:
    """One records.jsonl line in the protocol's section-5.1 schema.

    eval_returns / eval_lengths: the per-episode results of this evaluation ([E]); their
    means are eval_mean / eval_len_mean. s2: the S2 value at `rows` (EpisodeTracker.s2).
    train_means: window means by metric name (window_means); train_raw defaults to the
    same dict (our names are the native ones). retnorm: {"lo", "hi", "scale"} or None.
    Extra key beyond 5.1: eval_lengths (the per-episode lengths).
    """
    returns = None if eval_returns is None else [_float_or_none(r) for r in eval_returns]
    lengths = None if eval_lengths is None else [_count_or_none(n) for n in eval_lengths]
    if retnorm is not None:
        missing = {"lo", "hi", "scale"} - set(retnorm)
        if missing:
            raise ValueError(f"retnorm needs lo, hi and scale; missing {sorted(missing)}")
        retnorm = {k: _float_or_none(retnorm[k]) for k in ("lo", "hi", "scale")}
    train = {str(k): _float_or_none(v) for k, v in train_means.items()}
    raw = train if train_raw is None else {str(k): _float_or_none(v)
                                           for k, v in train_raw.items()}
    return {
        "side": str(side),
        "seed": int(seed),
        "rows": int(rows),
        "updates": int(updates),
        "eval_mean": None if returns is None else _mean_or_none(
            np.nan if r is None else r for r in returns),
        "eval_len_mean": None if lengths is None else _mean_or_none(
            np.nan if n is None else n for n in lengths),
        "eval_returns": returns,
        "eval_lengths": lengths,
        "s2_logged": _float_or_none(s2),
        "train": train,
        "train_raw": raw,
        "retnorm": retnorm,
        "wall_s": float(wall_s),
    }


def episode_row(seed: int, worker: int, row_last: int, length: int, score: float,
                terminal: bool) -> dict:
    """One episodes.jsonl line (protocol 5.1)."""
    return {"seed": int(seed), "worker": int(worker), "row_last": int(row_last),
            "length": int(length), "score": _float_or_none(score),
            "terminal": bool(terminal)}


# ---------------------------------------------------------------------------------------
# Window means of training metrics


def window_accumulate(sums: Mapping, counts: Mapping, metrics: Mapping) -> tuple[dict, dict]:
    """Add one update's metrics to the window sums, skipping NaN (jnp; jit-friendly).

    sums, counts, metrics: dicts by name of arrays of equal shape ([] or [S]). A NaN
    value neither adds to the sum nor counts, as the reference Agg does
    (embodied/core/agg.py:80-87 @29eb964); +-inf counts (it is not NaN there either).
    """
    import jax.numpy as jnp

    new_sums, new_counts = {}, {}
    for name, value in metrics.items():
        value = jnp.asarray(value, jnp.float32)
        ok = ~jnp.isnan(value)
        new_sums[name] = sums[name] + jnp.where(ok, value, 0.0)
        new_counts[name] = counts[name] + ok.astype(jnp.int32)
    return new_sums, new_counts


def window_means(sums: Mapping[str, Any], counts: Mapping[str, Any] | Any
                 ) -> dict[str, float | None]:
    """Window means sum / count per metric; None where nothing finite was counted.

    sums: {name: scalar}; counts: {name: scalar} (per-metric counts of non-NaN values, as
    window_accumulate keeps them) or one scalar count shared by every metric. A non-finite
    mean (an inf in the window) is None as well, since JSON has no inf.
    """
    out = {}
    for name, total in sums.items():
        count = counts[name] if isinstance(counts, Mapping) else counts
        count = float(np.asarray(count))
        out[name] = None if count <= 0 else _float_or_none(float(np.asarray(total)) / count)
    return out


def window_means_per_seed(sums: Mapping[str, Any], counts: Mapping[str, Any] | Any
                          ) -> list[dict[str, float | None]]:
    """window_means for arrays with a leading seed axis ([S]); one dict per seed."""
    sums = {k: np.asarray(v) for k, v in sums.items()}
    counts = ({k: np.asarray(v) for k, v in counts.items()} if isinstance(counts, Mapping)
              else np.asarray(counts))
    first = next(iter(sums.values()), None)
    n = 0 if first is None else first.shape[0]
    out = []
    for s in range(n):
        c = ({k: v[s] for k, v in counts.items()} if isinstance(counts, dict) else counts[s])
        out.append(window_means({k: v[s] for k, v in sums.items()}, c))
    return out


# ---------------------------------------------------------------------------------------
# S2: the training-episode statistic of protocol section 5.2


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
        return float(np.mean(np.asarray(means, np.float64)))

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


# ---------------------------------------------------------------------------------------
# The writer


def _fsync_append(path: Path, lines: list[str]) -> None:
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())


class RunWriter:
    """Writes a run directory's records, episodes, config and TensorBoard scalars.

    resume: the dict `positions()` returned when the checkpoint being resumed was saved.
    records.jsonl and episodes.jsonl are cut back to those byte offsets (dropping what a
    crashed run wrote after its checkpoint) and TensorBoard purges steps after
    resume["tb_step"]. tensorboard=False skips event files (tests, tools).
    """

    def __init__(self, run_dir: str | os.PathLike, *, resume: Mapping | None = None,
                 tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.records_path = self.run_dir / RECORDS_FILE
        self.episodes_path = self.run_dir / EPISODES_FILE
        self._tensorboard = tensorboard
        self._tb: dict[int, Any] = {}
        self._tb_step: int | None = None
        self._purge_step: int | None = None
        if resume is not None:
            self._truncate(self.records_path, int(resume["records_bytes"]))
            self._truncate(self.episodes_path, int(resume["episodes_bytes"]))
            if resume.get("tb_step") is not None:
                self._tb_step = int(resume["tb_step"])
                self._purge_step = self._tb_step + 1

    @staticmethod
    def _truncate(path: Path, size: int) -> None:
        have = path.stat().st_size if path.exists() else 0
        if have < size:
            raise ValueError(
                f"{path} has {have} bytes but the checkpoint recorded {size}: the run "
                "directory was changed after the checkpoint was written")
        if path.exists():
            os.truncate(path, size)

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def write_config(self, cfg_dict: Mapping) -> None:
        """config.json, sorted and indented; written via a temporary file and rename."""
        path = self.run_dir / CONFIG_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(dumps(cfg_dict, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def add_records(self, rows: Iterable[Mapping]) -> None:
        _fsync_append(self.records_path, [dumps(r) for r in rows])

    def add_episodes(self, rows: Iterable[Mapping]) -> None:
        """rows: dicts with seed, worker, row_last, length, score, terminal."""
        _fsync_append(self.episodes_path, [
            dumps(episode_row(r["seed"], r["worker"], r["row_last"], r["length"],
                              r["score"], r["terminal"])) for r in rows])

    def add_scalars(self, seed: int, step: int, scalars: Mapping) -> None:
        """TensorBoard scalars of one seed at `step` (rows); nested dicts become a/b tags,
        None values are skipped."""
        if not self._tensorboard:
            return
        writer = self._tb.get(int(seed))
        if writer is None:
            from tensorboardX import SummaryWriter

            logdir = self.run_dir / TB_DIR / f"seed_{int(seed)}"
            writer = SummaryWriter(logdir=str(logdir), purge_step=self._purge_step)
            self._tb[int(seed)] = writer
        for tag, value in flatten(scalars).items():
            if value is None:
                continue
            writer.add_scalar(tag, float(np.asarray(value)), global_step=int(step))
        writer.flush()
        self._tb_step = int(step) if self._tb_step is None else max(self._tb_step, int(step))

    def positions(self) -> dict:
        """Where the files end now; store it in a checkpoint's meta for `resume`."""
        def size(p: Path) -> int:
            return p.stat().st_size if p.exists() else 0

        return {"records_bytes": size(self.records_path),
                "episodes_bytes": size(self.episodes_path),
                "tb_step": self._tb_step}

    def close(self) -> None:
        for writer in self._tb.values():
            writer.close()
        self._tb.clear()


class NullWriter:
    """RunWriter's interface writing nothing: the non-primary processes of a multi-host
    run (process 0 writes the run directory's files)."""

    def __enter__(self) -> NullWriter:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def write_config(self, cfg_dict: Mapping) -> None:
        pass

    def add_records(self, rows: Iterable[Mapping]) -> None:
        pass

    def add_episodes(self, rows: Iterable[Mapping]) -> None:
        pass

    def add_scalars(self, seed: int, step: int, scalars: Mapping) -> None:
        pass
