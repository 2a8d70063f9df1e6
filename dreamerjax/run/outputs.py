"""Where a run's log points go besides its own files: Weights & Biases and MLflow.

The config's `logger.outputs` (the reference's HEAD key, configs.yaml:23 at e3f0224) names
them; `build` makes one callback per named output (callbacks.Callback: `on_log(point)`,
`state_dict`, `load_state_dict`), which the driver calls beside the callbacks it was
given, plus `on_files` (the report's pictures of a log point, the evaluation's video),
`on_videos` (each seed's video of a log point, run/videos.py) and `close` (the run's
curves, then the runs closed). The loop knows none of them.
`jsonl` (records.jsonl, always written: resume, summary and compare read it) and
`tensorboard` (records.RunWriter) are the driver's own.

One W&B run and one MLflow child run per seed. A seed is one learning curve, and both UIs
draw the mean and spread of several runs (W&B groups runs by `group`: ours is the run's
name; MLflow nests child runs under a parent) and compare runs across sweeps by config
(the seed is a config value of each). One run holding every seed as `seed_0/...` keys
could do neither. The reference runs one seed per process, each its own W&B run
(dreamerv3/main.py make_logger at e3f0224), which this keeps.

A resumed run continues the same W&B and MLflow runs: their ids are kept in
run_dir/loggers.json from the moment they are made (a run killed before its first
checkpoint resumes them too), with the last log point sent. The log points a killed run
had sent after its checkpoint are run again on resume and give the same records (the run
is deterministic), so they are not sent twice. logger.outputs may change on resume
(config/keys.RESUMABLE_FIELDS): `build` makes the outputs the resumed config names, so
one added starts at the resumed log point (or, named in loggers.json by an earlier call,
continues its runs) and one left out is not made, and stops.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dreamerjax.config.defaults import Config

STATE_FILE = "loggers.json"
VIDEO_KEY = "eval/video"  # a log point's video: W&B's key, TensorBoard's tag
# Output -> (the package it imports, the pyproject extra that installs it).
PACKAGES = {"wandb": ("wandb", "wandb"), "mlflow": ("mlflow", "mlflow")}
MLFLOW_STORE = "mlflow.db"  # the default store under the run directory (SQLite)
MLFLOW_ARTIFACTS = "mlartifacts"


class OutputError(ValueError):
    """An output that cannot start (a missing package, a W&B login): one line, naming the
    key, before anything compiles."""


def check_installed(config: Config) -> None:
    """OutputError naming the extra for each output of logger.outputs whose package is
    missing (nothing is imported)."""
    for name in config.logger.outputs:
        if name not in PACKAGES:
            continue
        module, extra = PACKAGES[name]
        if importlib.util.find_spec(module) is None:
            from dreamerjax.envs.registry import install_command

            raise OutputError(f"logger.outputs: {name} needs the {module} package (not "
                              f"installed): {install_command(extra)}")


def tensorboard(config: Config) -> bool:
    """Whether the run writes TensorBoard event files (logger.outputs has tensorboard)."""
    return "tensorboard" in config.logger.outputs


def build(config: Config, out: str | os.PathLike, seeds: Sequence[int], resume: bool,
          primary: bool = True) -> tuple:
    """The W&B and MLflow outputs named by config.logger.outputs, started (or, on resume,
    continued from run_dir/loggers.json). Only the primary process of a multi-host run
    logs (it writes the run directory)."""
    check_installed(config)
    if not primary:
        return ()
    state = read_state(out) if resume else {}
    made: list = []
    with closed_on_error(made):  # one that fails to start closes those started before it
        for name in config.logger.outputs:
            if name in OUTPUTS:
                made.append(OUTPUTS[name](config, out, tuple(seeds), state.get(name)))
    return tuple(made)


def add_files(callbacks: Iterable, rows: int | None, files: Sequence[os.PathLike]) -> None:
    """Hand files written for a log point (the report) to the callbacks that take files."""
    for cb in callbacks:
        if files and hasattr(cb, "on_files"):
            cb.on_files(rows, [Path(f) for f in files])


def add_videos(callbacks: Iterable, rows: int, files: Mapping[int, os.PathLike]) -> None:
    """Hand a log point's videos, {seed: mp4} (run/videos.py), to the callbacks that take
    videos: each to its seed's W&B run and MLflow child run."""
    for cb in callbacks:
        if files and hasattr(cb, "on_videos"):
            cb.on_videos(rows, {int(s): Path(f) for s, f in files.items()})


def close(callbacks: Iterable, ok: bool = True, run_dir: str | os.PathLike | None = None
          ) -> None:
    """Close the outputs among callbacks: the run's pictures (run_dir/*.png) go to them
    first when ok; a failed run's W&B runs end with exit code 1, MLflow's as FAILED."""
    for cb in callbacks:
        if hasattr(cb, "close"):
            cb.close(ok, run_dir)


@contextlib.contextmanager
def closed_on_error(callbacks: Iterable):
    """Inside: an exception closes the outputs as failed (and propagates)."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):  # the run's own error is what to report
            close(callbacks, ok=False)
        raise


def publish(run_dir: str | os.PathLike, config: Config, seeds: Sequence[int],
            files: Sequence[os.PathLike]) -> None:
    """Files written for a finished run (`dreamerjax eval --report --video`) sent to the
    runs of its outputs (the first seed's W&B run, the MLflow parent run); outputs that
    never started (no ids in loggers.json) are left alone."""
    state = read_state(run_dir)
    names = [n for n in config.logger.outputs if n in OUTPUTS and n in state]
    if not names or not files:
        return
    check_installed(config)
    made = [OUTPUTS[n](config, run_dir, tuple(seeds), state[n], first_only=True)
            for n in names]
    try:
        add_files(made, None, files)
    finally:
        close(made, ok=True)


# ----------------------------------------------------------------------------- shared


def read_state(run_dir: str | os.PathLike) -> dict:
    """run_dir/loggers.json ({} when missing)."""
    path = Path(run_dir) / STATE_FILE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot be read ({e}); remove it to start new W&B / "
                         "MLflow runs") from e


def _save_state(run_dir: str | os.PathLike, name: str, state: Mapping) -> None:
    path = Path(run_dir) / STATE_FILE
    whole = read_state(run_dir)
    whole[name] = dict(state)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(whole, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def run_name(run_dir: str | os.PathLike) -> str:
    """The run's name in W&B and MLflow: its directory's name."""
    return Path(run_dir).resolve().name


def params(config: Config) -> dict[str, Any]:
    """The resolved config under the reference's dotted keys (what `dreamerjax info`
    prints), lists as lists, plus the size label."""
    from dreamerjax.config import dotted as config_dotted

    flat = {k: list(v) if isinstance(v, tuple) else v
            for k, v in config_dotted.to_dotted(config).items()}
    return {**flat, "size": config.size}


def scalars(record: Mapping) -> dict[str, float]:
    """The numbers of one records.jsonl line under TensorBoard's names (eval/eval_mean,
    episode/train_return, train/<the reference's metric names>, retnorm/..., epstats/...,
    achievements/...) plus `updates`; missing and non-finite values are left out."""
    from dreamerjax.run import records

    out = {**records.tb_scalars(record), "updates": record.get("updates")}
    return {k: float(v) for k, v in out.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class _Output:
    """What the W&B and MLflow outputs share: their state in loggers.json, and the log
    points a resumed run had already sent."""

    name = ""

    def __init__(self, out: str | os.PathLike, state: Mapping | None):
        self.out = Path(out)
        self.state: dict = json.loads(json.dumps(dict(state or {})))
        self.state.setdefault("rows", 0)
        self.resumed = state is not None

    def save(self) -> None:
        _save_state(self.out, self.name, self.state)

    def sent(self, rows: int) -> bool:
        """Whether a log point at `rows` was sent before (by the run a resume continues)."""
        return rows <= self.state["rows"]

    def files_sent(self, rows: int | None) -> bool:
        """Whether a log point's files were sent before; marks them sent. rows None: files
        written after the run (always sent)."""
        if rows is None:
            return False
        if rows <= self.state.get("files_rows", 0):
            return True
        self.state["files_rows"] = rows
        self.save()
        return False

    def videos_sent(self, rows: int) -> bool:
        """Whether a log point's videos were sent before; marks them sent."""
        if rows <= self.state.get("video_rows", 0):
            return True
        self.state["video_rows"] = rows
        self.save()
        return False

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: Mapping) -> None:
        """Nothing: the ids live in loggers.json, which a checkpoint can be older than."""


# ----------------------------------------------------------------------------- W&B


class WandbOutput(_Output):
    """One W&B run per seed, grouped under the run's name; the config is W&B's config.
    first_only: open only the first seed's run (files after the run), config untouched."""

    name = "wandb"

    def __init__(self, config: Config, out, seeds: tuple[int, ...], state,
                 first_only: bool = False):
        super().__init__(out, state)
        import wandb

        self._wandb = wandb
        ids = self.state.setdefault("ids", {})
        title, cfg = run_name(out), config.logger
        self.runs: dict[int, Any] = {}
        for seed in seeds[:1] if first_only else seeds:
            ids.setdefault(str(seed), uuid.uuid4().hex[:12])
            values = {**params(config), "seed": seed, "seeds": list(seeds)}
            try:
                run = wandb.init(
                    project=cfg.wandb_project or None, entity=cfg.wandb_entity or None,
                    group=title, name=f"{title}-seed{seed}", id=ids[str(seed)],
                    resume="allow", dir=str(self.out), job_type="train",
                    reinit="create_new", settings=wandb.Settings(console="off", quiet=True))
                if not first_only:
                    run.config.update(values, allow_val_change=True)  # run.steps may grow
            except Exception as e:
                self.close(False, None)
                raise OutputError(f"logger.outputs: wandb could not start the run of seed "
                                  f"{seed} ({' '.join(str(e).split())}); `wandb login`, "
                                  "or WANDB_MODE=offline to write it to the run "
                                  "directory only") from e
            self.runs[seed] = run
        self.save()

    def on_log(self, point) -> None:
        if self.sent(point.rows):
            return
        for record in point.records:
            run = self.runs.get(record["seed"])
            if run is not None:
                run.log(scalars(record), step=point.rows)
        self.state["rows"] = point.rows
        self.save()

    def on_files(self, rows: int | None, files: Sequence[Path]) -> None:
        """Pictures as W&B images, GIFs and videos as W&B videos, in the first seed's run
        (the report and the evaluation video are the first seed's). rows None (after the
        run): at W&B's next step."""
        if not self.runs or self.files_sent(rows):
            return
        data = {}
        for path in files:
            key = f"{path.parent.name}/{path.stem}" if path.parent.name == "report" \
                else f"eval/{path.stem}"
            if path.suffix == ".png":
                data[key] = self._wandb.Image(str(path))
            elif path.suffix in (".gif", ".mp4"):
                data[key] = self._wandb.Video(str(path), format=path.suffix[1:])
        if data:
            run = next(iter(self.runs.values()))
            run.log(data, **({} if rows is None else {"step": rows}))

    def on_videos(self, rows: int, files: Mapping[int, Path]) -> None:
        """A log point's video of each seed in that seed's run, at step rows."""
        if not self.runs or self.videos_sent(rows):
            return
        for seed, path in files.items():
            run = self.runs.get(seed)
            if run is not None:
                run.log({VIDEO_KEY: self._wandb.Video(str(path), format="mp4")}, step=rows)

    def close(self, ok: bool, run_dir) -> None:
        for run in self.runs.values():
            with contextlib.suppress(Exception):
                run.finish(exit_code=0 if ok else 1)
        self.runs = {}


# ----------------------------------------------------------------------------- MLflow


def mlflow_uri(config: Config, out: str | os.PathLike) -> tuple[str, bool]:
    """(tracking URI, whether it is the run directory's own store): logger.mlflow.uri,
    else MLflow's own MLFLOW_TRACKING_URI, else a SQLite store in run_dir/mlflow.db (MLflow
    3 refuses its older ./mlruns file store by default)."""
    uri = config.logger.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    if uri:
        return uri, False
    return f"sqlite:///{Path(out).resolve() / MLFLOW_STORE}", True


class MlflowOutput(_Output):
    """A parent MLflow run for the run (params: the config and its seeds; artifacts: the
    curves, the report, the evaluation video) and a child run per seed (params: the config
    and its seed; metrics at each log point, step = rows). first_only: open only the
    parent and the first seed's run (files after the run)."""

    name = "mlflow"

    def __init__(self, config: Config, out, seeds: tuple[int, ...], state,
                 first_only: bool = False):
        super().__init__(out, state)
        from mlflow import MlflowClient

        uri, own = mlflow_uri(config, out)
        self.client = MlflowClient(tracking_uri=uri)
        self.state["uri"] = uri
        children = self.state.setdefault("children", {})
        if "parent" not in self.state:
            artifacts = (self.out.resolve() / MLFLOW_ARTIFACTS).as_uri() if own else None
            experiment = self._experiment(config.logger.mlflow_experiment, artifacts)
            self.state["experiment"] = experiment
            title = run_name(out)
            parent = self.client.create_run(experiment, run_name=title, tags={
                "dreamerjax.run_dir": str(self.out.resolve())})
            self.state["parent"] = parent.info.run_id
            self._params(self.state["parent"], {**params(config), "seeds": list(seeds)})
        for seed in seeds:
            if str(seed) not in children:
                child = self.client.create_run(self.state["experiment"],
                                               run_name=f"{run_name(out)}-seed{seed}",
                                               tags={"mlflow.parentRunId": self.state["parent"]})
                children[str(seed)] = child.info.run_id
                self._params(children[str(seed)], {**params(config), "seed": seed})
        opened = seeds[:1] if first_only else seeds
        self.runs = [self.state["parent"], *(children[str(s)] for s in opened)]
        if self.resumed:
            for run_id in self.runs:
                self.client.update_run(run_id, status="RUNNING")
        self.save()

    def _experiment(self, name: str, artifacts: str | None) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        return self.client.create_experiment(name, artifact_location=artifacts)

    def _params(self, run_id: str, values: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, json.dumps(v) if isinstance(v, list) else str(v))
                 for k, v in sorted(values.items())]
        for i in range(0, len(items), 100):  # MLflow's limit per batch
            self.client.log_batch(run_id, params=items[i:i + 100])

    def on_log(self, point) -> None:
        from mlflow.entities import Metric

        if self.sent(point.rows):
            return
        now = int(time.time() * 1000)
        for record in point.records:
            run_id = self.state["children"].get(str(record["seed"]))
            if run_id is None:
                continue
            metrics = [Metric(k, v, now, point.rows) for k, v in scalars(record).items()]
            for i in range(0, len(metrics), 1000):  # MLflow's limit per batch
                self.client.log_batch(run_id, metrics=metrics[i:i + 1000])
        self.state["rows"] = point.rows
        self.save()

    def on_files(self, rows: int | None, files: Sequence[Path]) -> None:
        """Files as artifacts of the parent run: the report's under report/ (each log
        point's replacing the last), others (the evaluation video) at the top."""
        if self.files_sent(rows):
            return
        for path in files:
            where = "report" if path.parent.name == "report" else None
            self.client.log_artifact(self.state["parent"], str(path), where)

    def on_videos(self, rows: int, files: Mapping[int, Path]) -> None:
        """A log point's video of each seed as an artifact of the seed's child run, under
        videos/ (point_K.mp4: one file per log point)."""
        if self.videos_sent(rows):
            return
        for seed, path in files.items():
            run_id = self.state["children"].get(str(seed))
            if run_id is not None:
                self.client.log_artifact(run_id, str(path), "videos")

    def close(self, ok: bool, run_dir) -> None:
        if not self.runs:
            return
        if ok and run_dir is not None:
            pictures = sorted(Path(run_dir).glob("*.png"))
            self.on_files(None, pictures)
        for run_id in self.runs:
            with contextlib.suppress(Exception):
                self.client.set_terminated(run_id, "FINISHED" if ok else "FAILED")
        self.runs = []


OUTPUTS = {"wandb": WandbOutput, "mlflow": MlflowOutput}
