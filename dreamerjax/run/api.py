"""The Python API's run-directory half: make a config, evaluate a run, load its config, and
the process settings the command line applies (`dreamerjax.make_config`,
`dreamerjax.evaluate`, `dreamerjax.load_config`, `dreamerjax.cli_settings`). Thin: each
calls the functions `dreamerjax eval` and `dreamerjax train` use."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dreamerjax.config import resolve
from dreamerjax.config.defaults import Config, RunConfig
from dreamerjax.config.keys import ConfigError

if TYPE_CHECKING:
    from dreamerjax.run.settings import Settings


@functools.wraps(resolve.make_config, assigned=("__doc__",))
def make_config(env: str | None = None, **kwargs: Any) -> Config:
    # resolve.make_config with a wrong env id named before the config's other errors
    # (EnvError, run/setup.check_env): `--steps 400` of a misspelt env is the env's error.
    try:
        return resolve.make_config(env, **kwargs)
    except ConfigError:
        if env is not None:  # the env with its suite's default settings
            from dreamerjax.run import setup as setup_lib

            setup_lib.check_env(Config(run=RunConfig(env=env)))
        raise


def load_config(run_dir: str | os.PathLike) -> Config:
    """The resolved Config of a run directory (its config.json), e.g. to continue it in a
    fresh process: `train(load_config(run), seeds, run, resume=True)`. ValueError naming
    the file when it is missing or unreadable."""
    from dreamerjax.run import records

    return records.read_run_config(str(run_dir))[0]


def run_seeds(run_dir: str | os.PathLike) -> tuple[int, ...]:
    """The seeds a run directory trains (its config.json)."""
    from dreamerjax.run import records

    return tuple(records.read_run_config(str(run_dir))[1])


def evaluate(run_or_result: Any, episodes: int = 10, seed: int | None = None,
             video: str | os.PathLike | None = None, mode: str = "sample",
             checkpoint: int | str = "latest") -> list[dict]:
    """Evaluate a trained agent on fresh episodes of its env.

    run_or_result: a run directory or one of its checkpoints (RUN/checkpoints/K), a
        policy file written by `dreamerjax export` (.npz: one seed's parameters, the
        numbers of that seed's checkpoint it was exported from), or the TrainResult that
        `train` returned (its parameters in memory).
    checkpoint: of a run directory, a kept checkpoint's number, "latest" (the newest that
        verifies) or "all" (every kept one, oldest first); each row then also has
        "checkpoint", "rows" and "updates". A policy file holds one: only "latest".
    episodes: evaluation episodes per seed. seed: one trained seed (None: every seed; a
        policy file's seed is its own).
    video: a .mp4 or .gif file: one evaluation episode of the first evaluated seed.
    mode: "sample" acts with samples of the policy (as training's evaluation), "mode"
        with its mode.

    Returns one dict per seed: {"seed", "returns" [episodes] (floats), "mean",
    "lengths" [episodes] (ints: steps)}, the first also {"video": path} when a video was
    written. The keys are those of `dreamerjax eval`, so a run directory gives the rows
    it prints.
    """
    import jax

    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import plan as plan_lib
    from dreamerjax.run import rundir
    from dreamerjax.run.result import TrainResult
    from dreamerjax.run.trainers import make_trainer

    if int(episodes) <= 0:
        raise ValueError(f"episodes must be positive, got {episodes}")
    if mode not in ("sample", "mode"):
        raise ValueError(f"mode must be 'sample' or 'mode', got {mode!r}")
    if video is not None and Path(video).suffix.lower() not in (".mp4", ".gif"):
        raise ValueError(f"video {video}: use a .mp4 or .gif file name")
    if isinstance(run_or_result, TrainResult):
        config, seeds = run_or_result.config, tuple(run_or_result.seeds)
        by_seed = run_or_result.params
    elif isinstance(run_or_result, str | os.PathLike) and Path(run_or_result).is_file():
        config, seeds, by_seed = _policy_file(run_or_result, seed, checkpoint)
    elif isinstance(run_or_result, str | os.PathLike):
        run_dir = str(run_or_result)
        inside = ckpt.split_checkpoint_path(run_dir)
        if inside is not None:
            run_dir, checkpoint = str(inside[0]), inside[1]
        if not Path(run_dir).is_dir():
            raise ValueError(f"{run_dir}: no such run directory")
        config, seeds = load_config(run_dir), run_seeds(run_dir)
        by_seed = None
    else:
        raise TypeError("evaluate: give a run directory or the TrainResult of train, got "
                        f"{type(run_or_result).__name__}")
    chosen = seeds if seed is None else (int(seed),)
    if chosen[0] not in seeds:
        raise ValueError(f"seed {seed} was not trained (seeds {list(seeds)})")
    config = dataclasses.replace(
        config, run=dataclasses.replace(config.run, eval_episodes=int(episodes)))
    trainer = make_trainer(plan_lib.make_plan(config, chosen))
    with contextlib.closing(trainer):
        if by_seed is not None:  # in memory: one evaluation
            params = jax.tree.map(lambda *xs: np.stack(xs), *(by_seed[s] for s in chosen))
            # The keys of `dreamerjax eval` (the evaluate_run stream, run/streams.py).
            rets, lens = trainer.evaluate(params, 0, mode == "mode", stream="evaluate_run")
            out = [rundir.episode_summary(s, r, n)
                   for s, r, n in zip(chosen, np.asarray(rets), np.asarray(lens), strict=True)]
        else:  # a run directory: one evaluation per chosen checkpoint
            out = []
            for index in ckpt.chosen(run_dir, checkpoint):
                params, rows = rundir.checkpoint_evaluation(
                    trainer, run_dir, index, config, seeds, chosen, mode == "mode")
                out += rows
        if video is not None:
            out[0]["video"] = str(_video(trainer, params, chosen[0], video, mode == "mode"))
    return out


def _policy_file(path: str | os.PathLike, seed: int | None, checkpoint: int | str
                 ) -> tuple[Config, tuple[int, ...], dict]:
    """(config, (seed,), {seed: params}) of an exported policy file, evaluated as the
    in-memory params of a TrainResult are; ValueError naming what does not fit."""
    from dreamerjax.run.policy import load_policy

    if checkpoint != "latest":
        raise ValueError(f"checkpoint {checkpoint}: {path} is a policy file, which holds "
                         "one checkpoint's parameters (evaluate its run directory instead)")
    policy = load_policy(path, seed)  # PolicyError (a ValueError): a seed it lacks
    return policy.config, (policy.seed,), {policy.seed: policy.params}


def _video(trainer, params, seed: int, path: str | os.PathLike, mode: bool) -> Path:
    """One evaluation episode of the first of `params`' seeds, as `dreamerjax eval
    --video` renders it (the video stream, run/streams.py)."""
    import jax

    from dreamerjax.run import rollout as rollout_lib
    from dreamerjax.run import streams
    from dreamerjax.viz import video as video_lib

    first = jax.tree.map(lambda x: x[0], params)
    key = streams.key(seed, "video")
    episode = rollout_lib.rollout(trainer.setup, first, key, mode)
    return Path(video_lib.write_video(
        path, video_lib.frames(trainer.setup.config.run.env, episode)))


def cli_settings(xla_tuning: bool = True) -> Settings:
    """What `dreamerjax train` sets up in its process, for `train(..., settings=cli_settings())`.

    Adds the XLA:CPU tuning option to XLA_FLAGS (run/xla_tuning.py; ~8 % faster updates
    on jaxlib 0.10.x, no number changed). XLA reads XLA_FLAGS when JAX starts its backend,
    so call this before anything runs on JAX (afterwards it warns and adds nothing;
    xla_tuning=False leaves XLA_FLAGS alone). Returns train's Settings for the rest: the
    command line's compilation cache directory, precompile (XLA's compile peak paid in a
    child process) and malloc_trim (glibc's freed heap handed back); no StopRequest
    (dataclasses.replace(settings, stop=...) adds one).
    """
    from dreamerjax.run import precompile
    from dreamerjax.run.settings import Settings

    if xla_tuning:
        if _backend_started():
            import warnings
            warnings.warn("cli_settings(): JAX's backend has started, so the XLA:CPU "
                          "option is not added; call it first thing", stacklevel=2)
        else:
            from dreamerjax.run import xla_tuning as tuning
            tuning.apply()
    return Settings(compile_cache=precompile.default_compile_cache_dir(), precompile=True,
                    malloc_trim=True)


def _backend_started() -> bool:
    """Whether JAX has started a backend in this process (XLA_FLAGS is read then)."""
    import sys

    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge
        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # another jax: assume started, add nothing
        return True


def imported_modules(names: Sequence[str]) -> list:
    """Import each named module (a module that registers envs); ValueError naming one
    that cannot be imported."""
    import importlib

    out = []
    for name in names:
        try:
            out.append(importlib.import_module(name))
        except ImportError as e:
            raise ValueError(f"--import {name}: {e}") from e
    return out
