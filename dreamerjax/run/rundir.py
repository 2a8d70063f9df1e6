"""What a finished (or stopped) run directory gives after training: any kept
checkpoint evaluated (`dreamerjax eval`), its open-loop report and a video of one episode;
and a config's parameter counts (`dreamerjax info`). Each builds the run's plan and
trainer as training does (plan.make_plan, trainers.make_trainer) and reads the checkpoint
as a resume would.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import numpy as np

from dreamerjax.config.defaults import Config
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import outputs, records, streams
from dreamerjax.run import plan as plan_lib
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.trainers import Trainer, make_trainer


def run_trainer(run_dir: str, episodes: int | None = None) -> Trainer:
    """The trainer of a run directory's plan (its config.json and seeds; eval_episodes
    replaced by `episodes` when given): the run's config validated and its setup built
    once, for every evaluation, report and video of `dreamerjax eval`."""
    config, seeds = records.read_run_config(run_dir)
    if episodes is not None:
        config = dataclasses.replace(
            config, run=dataclasses.replace(config.run, eval_episodes=episodes))
    return make_trainer(plan_lib.make_plan(config, seeds))


def evaluate_run(run_dir: str, episodes: int, mode: bool = False,
                 checkpoint: int | str = "latest", trainer: Trainer | None = None
                 ) -> list[dict]:
    """Evaluate checkpoints of a run: one dict per checkpoint and seed, {'checkpoint',
    'rows', 'updates', 'seed', 'returns', 'mean', 'lengths'} (the evaluate_run key stream,
    run/streams.py: the same episodes' keys for every checkpoint). checkpoint: a kept
    checkpoint's index, 'latest' (the newest that verifies; a damaged newest one: the
    previous, warned) or 'all' (every kept one, oldest first). trainer: run_trainer's of
    the run with `episodes` (None: made here)."""
    chosen = ckpt.chosen(run_dir, checkpoint)
    trainer = run_trainer(run_dir, episodes) if trainer is None else trainer
    config, seeds = trainer.plan.config, trainer.plan.seeds
    out = []
    for index in chosen:
        _, rows = checkpoint_evaluation(trainer, run_dir, index, config, seeds, seeds, mode)
        out += rows
    return out


def checkpoint_evaluation(trainer, run_dir: str, index: int, config: Config,
                          seeds: tuple[int, ...], chosen: tuple[int, ...], mode: bool
                          ) -> tuple[Any, list[dict]]:
    """Checkpoint `index` of a run of `seeds` evaluated for its `chosen` seeds (the
    evaluate_run key stream): (their params [chosen, ...], one row per chosen seed,
    {'checkpoint', 'rows', 'updates', 'seed', 'returns', 'mean', 'lengths'}). Only the
    agent's params are read (as load_policy reads them); the replay stays on disk."""
    from dreamerjax.run.policy import stacked_params

    every = stacked_params(run_dir, index, config, trainer.setup.spaces, len(seeds))
    pick = [seeds.index(s) for s in chosen]
    params = jax.tree.map(lambda x: np.asarray(x)[pick], every)
    rets, lens = trainer.evaluate(params, 0, mode, stream="evaluate_run")
    meta = ckpt.read_meta(run_dir, index)
    return params, [{"checkpoint": index, "rows": meta["rows"], "updates": meta["updates"][i],
                     **episode_summary(s, r, n)}
                    for i, s, r, n in zip(pick, chosen, np.asarray(rets), np.asarray(lens),
                                          strict=True)]


def episode_summary(seed: int, returns: np.ndarray, lengths: np.ndarray | None = None
                    ) -> dict:
    """{'seed', 'returns', 'mean', 'lengths'} of float32 episode returns [episodes] and
    their lengths [episodes] (steps, as ints; no 'lengths' when None), each return as its
    shortest float32 decimal (18.4, not 18.399999618530273) and the mean taken in float64
    over those."""
    values = [float(str(np.float32(x))) for x in np.asarray(returns, np.float32)]
    out = {"seed": seed, "returns": values, "mean": round(float(np.mean(values)), 6)}
    if lengths is not None:
        out["lengths"] = [int(n) for n in np.asarray(lengths)]
    return out


def eval_artifacts(run_dir: str, report: bool = False, video: str | os.PathLike | None = None,
                   mode: bool = False, trainer: Trainer | None = None) -> list:
    """The latest checkpoint's open-loop report (run_dir/report) and a video of one
    evaluation episode of the first seed; returns the files written. trainer: the run's
    (run_trainer; None: made here)."""
    from dreamerjax.run import rollout as rollout_lib
    from dreamerjax.viz import report as report_lib
    from dreamerjax.viz import video as video_lib

    config, seeds = records.read_run_config(run_dir)  # as it was trained (its outputs)
    trainer = run_trainer(run_dir) if trainer is None else trainer
    found = ckpt.latest_verified(run_dir)  # a damaged newest one: the previous, warned
    if found is None:
        raise ValueError(f"no checkpoint in {run_dir}")
    from dreamerjax.run.resume import load_state

    states = load_state(trainer, run_dir, found[0], found[1])
    written = []
    if report:
        host = trainer.report(states, found[0])
        title = f"{config.run.env}, seed {seeds[0]}, {found[1]['rows']} rows: "
        written += report_lib.write_openl(host, os.path.join(run_dir, "report"), title)
    if video is not None:
        params = jax.tree.map(lambda x: x[0], states.agent.params)
        episode = rollout_lib.rollout(trainer.setup, params, streams.key(seeds[0], "video"),
                                      mode)
        written.append(video_lib.write_video(
            video, video_lib.frames(config.run.env, episode)))
    outputs.publish(run_dir, config, seeds, written)  # to the run's W&B / MLflow runs
    return written


def describe(setup: setup_lib.Setup) -> dict[str, Any]:
    """Parameter counts per module of a setup's agent (no compile)."""
    from dreamerjax.algo import agent as agent_lib

    params = jax.eval_shape(lambda k: agent_lib.init_params(k, setup.config.agent,
                                                            setup.spaces),
                            jax.random.PRNGKey(0))
    return agent_lib.param_counts(params)
