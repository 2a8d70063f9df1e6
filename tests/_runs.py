"""The one small whole-run configuration the end-to-end tests share.

A test of a whole run checks a contract of the loop (records, resume, checkpoints, the
schedule's gate, loggers, kills), not learning, so it uses the smallest run that still
has every part: the tiny network (config.defaults.TINY), 8 envs, batches of 4 x 16 rows
(+1 context row) and train ratio 32, which keeps the reference's 0.5 updates per env row
(512 / (16 x 64) = 32 / (4 x 16)) at a sixteenth of an update's work. The replay ring is
fixed at 64 rows per env, so runs of any length compile the same program: with one
persistent compilation cache per test session (conftest.py), every test that trains this
configuration with the same number of seeds shares one compiled chunk.

Log points every 80 rows (10 ticks of 8 envs). The gate opens at row 132 (4 windows of 17
rows, the envs filled in turn: data.schedule.gate_rows), so the first log point has no
update, and the cumulative updates are 1 + floor((rows - 132) / 2) after it:
    rows     80   160   240   320   400
    updates   0    15    55    95   135
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

from dreamerjax.config import resolve as config_resolve
from dreamerjax.config import validate as config_validate
from dreamerjax.config.defaults import HEAD_REF, AgentConfig
from dreamerjax.config.resolve import make_config
from dreamerjax.run import records

SMALL_RUN = dict(num_envs=8, eval_every=80, eval_episodes=2, batch_size=4, batch_length=16,
                 train_ratio=32, replay_capacity=64)
STEPS = 240
UPDATES = {80: 0, 160: 15, 240: 55, 320: 95, 400: 135}  # cumulative, per seed (above)

# The same run on the command line (the reference's batch_length counts the context row).
SMALL_ARGV = ["--tiny", "--num-envs", "8", "--eval-every", "80", "--eval-episodes", "2",
              "--set", "batch_size=4", "--set", "batch_length=17",
              "--set", "run.train_ratio=32", "--set", "run.replay_capacity=64"]


def small_config(env: str = "CartPole-v1", steps: int = STEPS, **overrides):
    """The shared small run of `env` (a config.defaults.Config); overrides replace run
    fields (or make_config's own arguments)."""
    return make_config(env, tiny=True, **{**SMALL_RUN, "steps": steps, **overrides})


def trained_small_run(out: Path, seeds) -> Path:
    """`out` after the shared small run of CartPole with `seeds` (updates from row 160 on,
    checkpoints of its last two log points, rows 160 and 240)."""
    from dreamerjax.run import driver

    result = driver.train(small_config(), tuple(seeds), str(out), progress=False)
    assert result.records[-1]["updates"] > 0
    return out


def small_argv(steps: int = STEPS) -> list[str]:
    """`dreamerjax train` arguments of small_config(steps=steps) (add --seeds, --out)."""
    return [*SMALL_ARGV, "--steps", str(steps)]


def at_head(cfg, cnn_mults: tuple[int, ...] | None = None):
    """A tiny-network config's run with the HEAD (e3f0224) version: HEAD's tiny agent and
    suite settings as `--reference e3f0224 --tiny` resolves them (cnn_mults: HEAD's CNN
    stages for small images), cfg's run fields unchanged."""
    assert cfg.size == "tiny", cfg.size
    head, _ = config_resolve.resolve(reference=HEAD_REF, tiny=True)
    out = dataclasses.replace(head, agent=with_cnn(head.agent, cnn_mults, None), run=cfg.run)
    config_validate.validate(out)
    return out


def with_cnn(acfg: AgentConfig, mults: tuple[int, ...] | None = None,
             minres: int | None = None) -> AgentConfig:
    """The image encoder's and decoder's stages (depth multipliers) and final resolution
    replaced together, e.g. mults (1, 2) and minres 5 for MinAtar's 10 x 10 images."""
    rep = dataclasses.replace
    kw = {k: v for k, v in (("mults", mults), ("minres", minres)) if v is not None}
    if not kw:
        return acfg
    if "mults" in kw:
        kw["mults"] = tuple(kw["mults"])
    return rep(acfg, enc=rep(acfg.enc, **kw), dec=rep(acfg.dec, **kw))


def read_scalars(run_dir: str | os.PathLike) -> dict[int, list[tuple[str, int, float]]]:
    """Every TensorBoard scalar of a run, per seed, in file order: (tag, step, value).

    Reads the event files' TFRecord framing with tensorboardX's protobuf (a resumed run
    must hold each point exactly once)."""
    import struct

    from tensorboardX.proto import event_pb2

    out: dict[int, list[tuple[str, int, float]]] = {}
    for seed_dir in sorted((Path(run_dir) / records.TB_DIR).glob("seed_*")):
        points = out.setdefault(int(seed_dir.name.split("_")[1]), [])
        for path in sorted(seed_dir.glob("events.out.tfevents.*")):
            data = path.read_bytes()
            pos = 0
            while pos + 12 <= len(data):
                (length,) = struct.unpack("<Q", data[pos:pos + 8])
                body = data[pos + 12:pos + 12 + length]
                pos += 12 + length + 4
                event = event_pb2.Event.FromString(body)
                for v in event.summary.value:
                    if v.WhichOneof("value") == "simple_value":  # not images
                        points.append((v.tag, int(event.step), float(v.simple_value)))
    return out


def without_timing(record) -> dict:
    """A record without its timing fields (records.TIMING_FIELDS), for comparing runs'
    results: those differ between runs whose results are equal."""
    return {k: v for k, v in record.items() if k not in records.TIMING_FIELDS}


@contextlib.contextmanager
def offline_loggers():
    """While inside: W&B offline (its own switch: no network) and MLflow's default store;
    the process's variables put back after (module fixtures cannot use monkeypatch)."""
    saved = {k: os.environ.get(k) for k in ("WANDB_MODE", "MLFLOW_TRACKING_URI")}
    os.environ["WANDB_MODE"] = "offline"
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
