"""The open-loop report of a log point (viz/report.py's pictures): when it is due and
where its files go."""

from __future__ import annotations

import os

from dreamerjax.config.defaults import Config
from dreamerjax.run.callbacks import LogPoint
from dreamerjax.run.setup import SeedState
from dreamerjax.run.trainers import Trainer


def write_report(trainer: Trainer, states: SeedState, point: LogPoint, writer, out: str,
                 primary: bool) -> list:
    """The open-loop report of a log point: files under out/report (the latest log
    point's) and TensorBoard images. Nothing before the first update (the replay cannot
    be sampled yet). Every process of a multi-host run calls it (the report gathers the
    first seed's arrays, a collective); only the primary writes."""
    from dreamerjax.viz import report

    if point.records[0]["updates"] <= 0:
        return []
    host = trainer.report(states, point.log_index)
    if not primary:
        return []
    title = f"{point.config.run.env}, seed {point.seeds[0]}, {point.rows} rows: "
    files = report.write_openl(host, os.path.join(out, "report"), title)
    for path in files:
        if path.suffix == ".png":
            writer.add_image(point.seeds[0], point.rows, f"report/{path.stem}", path)
    return files


def should_report(config: Config, log_index: int, num_logs: int) -> bool:
    """The open-loop report every run.report_every log points and at the last (0: never)."""
    every = config.run.report_every
    return every > 0 and ((log_index + 1) % every == 0 or log_index + 1 == num_logs)
