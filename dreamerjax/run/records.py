"""Host-side run records: JSONL files and TensorBoard scalars.

A run directory holds

    config.json      the resolved config (sorted keys, indented), its seeds and the
                     modules that registered its env (config_file)
    records.jsonl    one line per seed per log point (protocol section 5.1)
    episodes.jsonl   one line per finished training episode
    tb/seed_{s}/     TensorBoard event files, one writer per seed
    checkpoints/     see checkpoint.py

Every JSON value written here is strict JSON: NaN and +-inf become null, numpy and JAX
scalars become Python numbers. Lines are flushed and fsynced on every call; `positions()`
records how far the files go so a resumed run can cut off what was written after its
checkpoint.
"""

from __future__ import annotations

import gzip
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
# Record fields that time the run (wall clock, host_time.py's phases): they differ between
# runs whose results are equal (a resumed run and the run left whole).
TIMING_FIELDS = ("wall_s", "host_s")


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


def inf_as_text(value: Any) -> Any:
    """A config's values with each infinite float as the text "inf" / "-inf"."""
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: inf_as_text(v) for k, v in value.items()}
    return value


def dumps(value: Any, **kwargs) -> str:
    """Strict JSON text of `value` (non-finite floats as null)."""
    return json.dumps(to_jsonable(value), allow_nan=False, **kwargs)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """All objects of a (possibly gzipped) JSONL file; a missing file reads as empty.

    A last line without its newline (a write cut short by a crash) is ignored; any other
    line that is not a JSON object raises ValueError naming the file and line.
    NaN/Infinity literals (other tools' records) are accepted.
    """
    path = Path(path)
    if not path.exists():
        return []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i}: not a JSON object")
        out.append(row)
    return out


def config_file(config, seeds: Iterable[int]) -> dict:
    """What config.json holds: the resolved config, the seeds and, for an env registered
    with dreamerjax.register_env by an importable module, that module ("env_modules"), by
    a script or notebook, that fact ("env_registered_in_script")."""
    from dreamerjax.envs.registry import registered_in_script, registering_modules

    modules = registering_modules(config.run.env)
    return (config.to_dict() | {"seeds": [int(s) for s in seeds]}
            | ({"env_modules": list(modules)} if modules else {})
            | ({"env_registered_in_script": True}
               if registered_in_script(config.run.env) else {}))


# Keys every config.json has had (a file without one is damaged, not old): the seeds, the
# config's sections, and the run's keys that define it.
CONFIG_FILE_KEYS = ("seeds", "agent", "run", "run.env", "run.steps", "run.num_envs",
                    "run.eval_every", "run.batch_size", "run.batch_length")


def check_config_file(saved: Any, path: Path) -> None:
    """ValueError "PATH is damaged: ..." naming the first key that is missing or of the
    wrong kind, before the file's values are read as a run's."""
    def damaged(why: str) -> ValueError:
        return ValueError(f"{path} is damaged: {why}; restore it from a copy (or start a "
                          "new run)")

    if not isinstance(saved, dict):
        raise damaged(f"holds a {type(saved).__name__}, not the run's config object")
    for key in CONFIG_FILE_KEYS:
        section, _, name = key.partition(".")
        value = saved.get(section) if not name else saved.get(section, {}).get(name)
        if value is None:
            raise damaged(f"no {key!r}")
        if key == "seeds" and not (isinstance(value, list) and value and all(
                isinstance(s, int) and not isinstance(s, bool) for s in value)):
            raise damaged(f"'seeds' is {value!r}, not a list of one or more integers")
        if key in ("agent", "run") and not isinstance(value, dict):
            raise damaged(f"{key!r} is {value!r}, not a section")
        if name and name != "env" and not (isinstance(value, int)
                                            and not isinstance(value, bool)):
            raise damaged(f"{key!r} is {value!r}, not an integer")


def read_run_config(run_dir: str | os.PathLike):
    """(Config, seeds) of a run directory, from its config.json; ValueError naming the file
    when it is missing or unreadable. The modules that registered the run's env are
    imported first, so that its env exists in this process too."""
    from dreamerjax.config.defaults import from_dict
    from dreamerjax.config.dotted import RUN_FILE_KEYS

    path = Path(run_dir) / CONFIG_FILE
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the run's config ({e})") from e
    check_config_file(saved, path)
    try:
        seeds = tuple(int(s) for s in saved.get("seeds", ()))
        modules = [str(m) for m in saved.get("env_modules", ())]
        config = from_dict({k: v for k, v in saved.items() if k not in RUN_FILE_KEYS})
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: cannot read the run's config ({e})") from e
    _import_env_modules(modules, path)
    _check_env_registered(saved, config.run.env, path)
    return config, seeds


def _check_env_registered(saved: dict, env_id: str, path: Path) -> None:
    """ValueError naming the fix when the run's env was registered by a script or notebook
    that this process has not run (no module to import it from)."""
    from dreamerjax.envs.registry import REGISTERED_BY

    if saved.get("env_registered_in_script") and env_id not in REGISTERED_BY:
        raise ValueError(f"{path}: the run's env {env_id!r} was registered with "
                         "dreamerjax.register_env in a script or notebook, which this "
                         "process has not run: pass --import MODULE (a module that registers "
                         "it) or call dreamerjax.register_env first")


def _import_env_modules(modules: Iterable[str], path: Path) -> None:
    """Import each module (already imported ones are not run again). One that cannot be
    imported is told of, not raised: the records can still be read, and building the env
    then fails naming --import."""
    import importlib
    import sys

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a user's module may raise anything
            print(f"{path}: the run's env was registered by module {name!r}, which cannot "
                  f"be imported here ({type(e).__name__}: {e}); put it on the path or "
                  "pass --import MODULE", file=sys.stderr)


def run_file(run_dir: str | os.PathLike, name: str) -> Path:
    """RUN_DIR/name, or its gzipped copy name.gz where only that exists (a results folder
    may keep its records gzipped)."""
    path = Path(run_dir) / name
    gz = path.with_name(name + ".gz")
    return gz if not path.exists() and gz.exists() else path


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    return read_jsonl(run_file(run_dir, RECORDS_FILE))


def read_episodes(run_dir: str | os.PathLike) -> list[dict]:
    return read_jsonl(run_file(run_dir, EPISODES_FILE))


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
    seed: int,
    rows: int,
    updates: int,
    eval_returns: Iterable[float] | None,
    eval_lengths: Iterable[float] | None,
    train_means: Mapping[str, float | None],
    retnorm: Mapping[str, float] | None,
    wall_s: float | None = None,
    train_return: float | None = None,
) -> dict:
    """One records.jsonl line: a seed at a log point.

    eval_returns / eval_lengths: the per-episode results of this evaluation ([E]); their
    means are eval_mean / eval_len_mean. train_means: window means by metric name
    (metric_window.result; the reference's names). retnorm: {"lo", "hi", "scale"} or
    None. train_return: the mean score of the training episodes that ended in this log
    interval (None if none did). wall_s: the run's seconds at this record; None leaves it
    to the writer (the training loop stamps it, with host_s, as the record is written:
    run/host_time.stamp). Callbacks may add fields.
    """
    returns = None if eval_returns is None else [_float_or_none(r) for r in eval_returns]
    lengths = None if eval_lengths is None else [_count_or_none(n) for n in eval_lengths]
    if retnorm is not None:
        missing = {"lo", "hi", "scale"} - set(retnorm)
        if missing:
            raise ValueError(f"retnorm needs lo, hi and scale; missing {sorted(missing)}")
        retnorm = {k: _float_or_none(retnorm[k]) for k in ("lo", "hi", "scale")}
    return {
        "seed": int(seed),
        "rows": int(rows),
        "updates": int(updates),
        "eval_mean": None if returns is None else _mean_or_none(
            np.nan if r is None else r for r in returns),
        "eval_len_mean": None if lengths is None else _mean_or_none(
            np.nan if n is None else n for n in lengths),
        "eval_returns": returns,
        "eval_lengths": lengths,
        "train_return": _float_or_none(train_return),
        "train": {str(k): _float_or_none(v) for k, v in train_means.items()},
        "retnorm": retnorm,
        "wall_s": None if wall_s is None else float(wall_s),
    }


EPISODE_LOG_PREFIX = "log_"  # per-episode suite keys (the reference's log_ keys)
ACHIEVEMENT_PREFIX = "log_achievement_"


def episode_stats(episodes: Iterable[Mapping], keys: Iterable[str] = ()) -> dict:
    """The per-log-point aggregates of the suites' per-episode `log_*` keys over the
    episodes that ended in the interval (one seed's episodes.jsonl rows), for its
    records.jsonl line; {} when the env has no such keys.

    - `epstats`: {key: mean over the episodes}, as the reference's `epstats/<key>`
      (embodied/run/train.py:48-65,117: each key reduced over its episode by
      log_keys_sum / avg / max, then averaged over the interval's episodes; the episode
      rows already hold the per-episode value, e.g. Crafter's log_keys_max
      '^log_achievement_.*', configs.yaml:224).
    - `achievements`: {name: fraction of the episodes with log_achievement_<name> > 0},
      the success rate of each achievement (Crafter's measure). For Craftax, whose keys
      are 0/1 per episode, it equals the epstats mean; for Crafter's unlock counts the
      epstats mean is the mean count.

    keys: the env's episode key names (EnvSpec.episode_keys); keys found in the episodes
    are added. A key no episode of the interval has (no episode ended) is None."""
    episodes = list(episodes)
    names = [k for k in keys if k.startswith(EPISODE_LOG_PREFIX)]
    for e in episodes:
        names += [k for k in e if k.startswith(EPISODE_LOG_PREFIX) and k not in names]
    if not names:
        return {}

    def values(key):
        return [float(e[key]) for e in episodes if e.get(key) is not None]

    out: dict[str, dict] = {"epstats": {k: _mean_or_none(values(k)) for k in names}}
    ach = [k for k in names if k.startswith(ACHIEVEMENT_PREFIX)]
    if ach:
        out["achievements"] = {k[len(ACHIEVEMENT_PREFIX):]: _mean_or_none(
            v > 0 for v in values(k)) for k in ach}
    return out


def tb_scalars(record: Mapping) -> dict[str, float | None]:
    """The TensorBoard scalars of one record (tags eval/..., train/..., retnorm/...,
    epstats/..., achievements/...)."""
    out = {f"eval/{k}": record.get(k) for k in ("eval_mean", "eval_len_mean")}
    out["episode/train_return"] = record.get("train_return")
    for group in ("epstats", "achievements"):
        out.update({f"{group}/{k}": v for k, v in (record.get(group) or {}).items()})
    out.update({f"train/{k}": v for k, v in (record.get("train") or {}).items()})
    out.update({f"retnorm/{k}": v for k, v in (record.get("retnorm") or {}).items()})
    return out


def episode_row(seed: int, worker: int, row_last: int, length: int, score: float,
                terminal: bool, **extra: Any) -> dict:
    """One episodes.jsonl line; `extra` holds suite keys (e.g. log_achievement_*)."""
    return {"seed": int(seed), "worker": int(worker), "row_last": int(row_last),
            "length": int(length), "score": _float_or_none(score),
            "terminal": bool(terminal), **{k: to_jsonable(v) for k, v in extra.items()}}


# ---------------------------------------------------------------------------------------
# The writer


def _fsync_append(path: Path, lines: list[str]) -> None:
    """Append lines and fsync. An OSError (a full disk, a read-only directory) propagates:
    what reached the file is cut back to the checkpoint's offsets on resume."""
    if not lines:
        return
    text = "".join(line + "\n" for line in lines)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class RunWriter:
    """Writes a run directory's records, episodes, config and TensorBoard scalars.

    resume: the dict `positions()` returned when the checkpoint being resumed was saved;
    records.jsonl and episodes.jsonl are cut back to those byte offsets (dropping what a
    killed run wrote after its checkpoint, torn last lines included). TensorBoard scalars
    are derived data: the driver rewrites them from records.jsonl on resume.
    tensorboard=False skips event files (tests, tools).
    """

    def __init__(self, run_dir: str | os.PathLike, *, resume: Mapping | None = None,
                 tensorboard: bool = True) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.records_path = self.run_dir / RECORDS_FILE
        self.episodes_path = self.run_dir / EPISODES_FILE
        self._tensorboard = tensorboard
        self._tb: dict[int, Any] = {}
        if resume is not None:
            self._truncate(self.records_path, int(resume["records_bytes"]))
            self._truncate(self.episodes_path, int(resume["episodes_bytes"]))

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
        """config.json, sorted and indented; written via a temporary file and rename. An
        infinite value (replay.prio.initial's default) is written as the string "inf",
        which strict JSON can hold and the config reads back as the float."""
        path = self.run_dir / CONFIG_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(dumps(inf_as_text(cfg_dict), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def add_records(self, rows: Iterable[Mapping]) -> None:
        _fsync_append(self.records_path, [dumps(r) for r in rows])

    def add_episodes(self, rows: Iterable[Mapping]) -> None:
        """rows: episodes.jsonl dicts (episode_row)."""
        _fsync_append(self.episodes_path, [dumps(r) for r in rows])

    def add_scalars(self, seed: int, step: int, scalars: Mapping) -> None:
        """TensorBoard scalars of one seed at `step` (rows); nested dicts become a/b tags,
        None values are skipped."""
        if not self._tensorboard:
            return
        writer = self._tb.get(int(seed))
        if writer is None:
            from tensorboardX import SummaryWriter

            logdir = self.run_dir / TB_DIR / f"seed_{int(seed)}"
            writer = SummaryWriter(logdir=str(logdir))
            self._tb[int(seed)] = writer
        for tag, value in flatten(scalars).items():
            if value is None:
                continue
            writer.add_scalar(tag, float(np.asarray(value)), global_step=int(step))
        writer.flush()

    def add_image(self, seed: int, step: int, tag: str, png: str | os.PathLike) -> None:
        """A PNG file as a TensorBoard image of one seed at `step`."""
        if not self._tensorboard:
            return
        import imageio.v3 as iio

        self.add_scalars(seed, step, {})  # opens the seed's writer
        image = np.asarray(iio.imread(png))[..., :3]
        self._tb[int(seed)].add_image(tag, image, global_step=int(step), dataformats="HWC")
        self._tb[int(seed)].flush()

    def add_video(self, seed: int, step: int, tag: str, frames, fps: int) -> None:
        """Frames [T] (RGB uint8 [H, W, 3]) as a TensorBoard video of one seed at `step`:
        an animated GIF in an image summary, as tensorboardX's add_video writes it (which
        needs moviepy to encode; Pillow encodes it here). TensorBoard's image dashboard
        plays it."""
        if not self._tensorboard:
            return
        import imageio.v3 as iio
        from tensorboardX.proto.summary_pb2 import Summary

        self.add_scalars(seed, step, {})  # opens the seed's writer
        frames = np.stack([np.asarray(f, np.uint8) for f in frames])
        gif = iio.imwrite("<bytes>", frames, extension=".gif", duration=1000 / fps, loop=0)
        height, width, channels = frames.shape[1:]
        image = Summary.Image(height=height, width=width, colorspace=channels,
                              encoded_image_string=gif)
        writer = self._tb[int(seed)]
        writer._get_file_writer().add_summary(
            Summary(value=[Summary.Value(tag=tag, image=image)]), int(step))
        writer.flush()

    def positions(self) -> dict:
        """Where the files end now; store it in a checkpoint's meta for `resume`."""
        def size(p: Path) -> int:
            return p.stat().st_size if p.exists() else 0

        return {"records_bytes": size(self.records_path),
                "episodes_bytes": size(self.episodes_path)}

    def close(self) -> None:
        for writer in self._tb.values():
            writer.close()
        self._tb.clear()


class NullWriter(RunWriter):
    """RunWriter's interface writing nothing: the non-primary processes of a multi-host
    run (process 0 writes the run directory's files)."""

    def __init__(self, run_dir: str | os.PathLike, **kwargs: Any) -> None:
        self.run_dir = Path(run_dir)
        self._tb = {}

    def write_config(self, cfg_dict: Mapping) -> None:
        pass

    def add_records(self, rows: Iterable[Mapping]) -> None:
        pass

    def add_episodes(self, rows: Iterable[Mapping]) -> None:
        pass

    def add_scalars(self, seed: int, step: int, scalars: Mapping) -> None:
        pass

    def add_image(self, seed: int, step: int, tag: str, png: str | os.PathLike) -> None:
        pass

    def add_video(self, seed: int, step: int, tag: str, frames, fps: int) -> None:
        pass

    def positions(self) -> dict:
        return {"records_bytes": 0, "episodes_bytes": 0}


def plot_run(run_dir: str | os.PathLike) -> list[Path]:
    """Every picture of a run directory from its records.jsonl and config.json."""
    from dreamerjax.viz import plots

    run_dir = Path(run_dir)
    env = run_env(run_dir)
    recs = read_records(run_dir)
    return [plots.plot_curves(recs, run_dir / "curves.png", env)] + plots.plot_metrics(
        recs, run_dir, env)


def run_env(run_dir: str | os.PathLike) -> str | None:
    """The env id of a run directory (or results folder) from its config.json, if any."""
    import json

    try:
        return json.loads((Path(run_dir) / CONFIG_FILE).read_text())["run"]["env"]
    except (OSError, KeyError, ValueError):
        return None
