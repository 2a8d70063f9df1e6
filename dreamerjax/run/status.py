"""What a run says while it trains: the status line of each log point, the progress bar
(a terminal or a notebook), the heartbeat's period and the line of a stop."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Mapping

import numpy as np

from dreamerjax.run import records
from dreamerjax.run.callbacks import LogPoint

HEARTBEAT_S = 60.0  # seconds between the lines of a run's progress where no bar is drawn


NOT_WORLD_MODEL = ("actor", "critic", "replay_critic")
# The status line's figures read from a window's metric means: figure -> the metric names
# that carry it, the first one a record has (29eb964's tensorstats mean, e3f0224's own
# scalar: agent.loss_metrics, metrics_e3f0224.loss_metrics_e3f0224). wm_loss is world_model_loss's.
STATUS_METRICS = {"actor_entropy": ("ent/action/mean", "ent/action")}


def start_line(run, seeds, out: str, resumed: tuple[int, dict] | None) -> str:
    """The run's first line, said before the compile's minutes: the env, the seeds, the
    rows and the log interval; a resumed run names the checkpoint it continues from and
    its row. run: the run's RunConfig; resumed: (index, meta) of that checkpoint, None
    for a fresh start."""
    head = f"[dreamerjax] {run.env}, seeds {list(seeds)}: "
    tail = (f", a log point every {run.eval_every:,}; compiling, then training to the "
            f"{'next' if resumed else 'first'} (a line at every log point)")
    if resumed is None:
        return f"{head}{run.steps:,} rows{tail}"
    index, meta = resumed
    return (f"{head}resuming {out} from checkpoint {index} (row {int(meta['rows']):,} of "
            f"{run.steps:,}){tail}")


def world_model_loss(train: Mapping, scales: Mapping[str, float]) -> float | None:
    """The scaled world-model loss of a window's means: the decoder terms (one per
    observation key) + reward + cont + dyn + rep, each times its loss scale (scales:
    agent.loss_scales)."""
    terms = [(train.get(f"{k}_loss"), w) for k, w in scales.items() if k not in NOT_WORLD_MODEL]
    terms = [(v, w) for v, w in terms if v is not None]
    return sum(v * w for v, w in terms) if terms else None


def status_line(point: LogPoint, updates_per_s: float, scales: Mapping[str, float]) -> str:
    """One grep-able line per log point (means over seeds): rows, updates, then the names
    that logger.filter finds (re.search) among the line's figures and the records' scalars
    (records.tb_scalars). What is not known yet is said: before the first update the
    losses and speed give way to "(no update yet)", and a value no seed has (no training
    episode ended in the interval) reads n/a. scales: agent.loss_scales."""
    def mean(values, fmt):
        values = [v for v in values if v is not None]
        return format(float(np.mean(values)), fmt) if values else "n/a"

    recs = point.records
    shown = {"eval_return": mean((r["eval_mean"] for r in recs), ".1f"),
             "train_return": mean((r["train_return"] for r in recs), ".1f")}
    updated = recs[0]["updates"] > 0
    if updated:
        shown["wm_loss"] = mean((world_model_loss(r["train"], scales) for r in recs), ".3f")
        for figure, names in STATUS_METRICS.items():
            shown[figure] = mean((next((r["train"][n] for n in names if n in r["train"]), None)
                                  for r in recs), ".3f")
        shown["updates/s"] = f"{updates_per_s:.2f}"
        # Then every scalar of the records (mean over seeds) but the two shown above.
        names = dict.fromkeys(k for r in recs for k in records.tb_scalars(r))
        for name in [n for n in names if n not in ("eval/eval_mean", "episode/train_return")]:
            shown[name] = mean((records.tb_scalars(r).get(name) for r in recs), ".4g")
    keep = re.compile(point.config.logger.filter).search  # logger.filter, as the reference's
    parts = [f"[dreamerjax] rows {point.rows} updates {recs[0]['updates']}",
             *(f"{k} {v}" for k, v in shown.items() if keep(k))]
    return " ".join(parts if updated else [*parts, "(no update yet)"])


def say_progress(point: LogPoint, updates_per_s: float, scales: Mapping[str, float], bar,
                 rows: int, show: bool) -> None:
    """The status line of a log point: under the bar (advanced by the interval's rows)
    where there is one, else on stderr when show (the primary process, progress on)."""
    line = status_line(point, updates_per_s, scales)
    if bar is not None:
        bar.update(rows)
        bar.write(line, file=sys.stderr)
    elif show:
        print(line, file=sys.stderr)


def say_stopped(reason: str, out: str, rows: int, saved: bool, primary: bool) -> None:
    """Why the run stopped where it did, and how to continue it (if it can be)."""
    if not primary:
        return
    if saved:
        print(f"dreamerjax: {reason}: stopped at row {rows} after its checkpoint; continue "
              f"with: dreamerjax train --resume {out}", file=sys.stderr)
    else:
        print(f"dreamerjax: {reason}: stopped at row {rows}; this run writes no "
              "checkpoints (--checkpoint-every 0), so it cannot be resumed", file=sys.stderr)


def progress_bar(enabled: bool, total: int, initial: int):
    """A progress bar on a terminal, and in a notebook (tqdm.auto: a widget where
    ipywidgets is installed); redirected to a file or a pipe (a cluster's job log), stderr
    gets the status lines (and the heartbeat's) alone, since a bar's carriage returns
    would garble it."""
    if not enabled:
        return None
    if sys.stderr.isatty():
        from tqdm import tqdm
    elif in_notebook():
        from tqdm.auto import tqdm
    else:
        return None
    return tqdm(total=total, initial=initial, unit="rows", dynamic_ncols=True)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's shell with a kernel)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and hasattr(shell, "kernel")


def close_progress_bars() -> None:
    """End a progress bar an exception left open, so the error starts its own line."""
    tqdm = sys.modules.get("tqdm")
    for bar in list(getattr(getattr(tqdm, "tqdm", None), "_instances", None) or ()):
        with contextlib.suppress(Exception):
            bar.close()

