"""CartPole learned offline: an agent trained only on a recorded replay's rows, no env step,
reaches an evaluation mean return of 150 (slow tier; minutes on an accelerator).

The replay is recorded first by an online run with the demo's settings (cli_args.DEMO_RUN:
the 1m model, 8 envs, batch 8 x 16, train ratio 64, 6,400 rows), which learns CartPole in
that budget, and exported as chunk files (`dreamerjax replay export`); a fresh agent then
trains on those rows alone (`--replay-from DIR --offline`) with the same schedule.
"""

from __future__ import annotations

import pytest

from dreamerjax.run import driver, replay_io
from dreamerjax.run.api import make_config
from dreamerjax.tools import args as cli_args
from dreamerjax.tools import cli

LEARNED = cli.DEMO_LEARNED  # 150, the demo's bar


def demo_config(steps: int, **fields):
    run = cli_args.DEMO_RUN
    return make_config(run["env"], size=run["size"], sets=list(run["set"]), steps=steps,
                       eval_every=run["eval_every"], eval_episodes=run["eval_episodes"],
                       num_envs=run["num_envs"], train_ratio=run["train_ratio"],
                       report_every=run["report_every"], **fields)


def record_and_train_offline(tmp_path, steps: int) -> tuple[list[dict], list[dict]]:
    """(the recording run's records, the offline run's records)."""
    recorded = tmp_path / "recorded"
    online = driver.train(demo_config(steps), (0,), str(recorded), progress=False).records
    replay = tmp_path / "replay"
    replay_io.export(recorded, replay)
    offline = driver.train(demo_config(steps, replay_from=str(replay), offline=True), (0,),
                           str(tmp_path / "offline"), progress=False).records
    return online, offline


@pytest.mark.slow
def test_cartpole_learns_offline_from_a_recorded_replay(tmp_path):
    online, offline = record_and_train_offline(tmp_path, cli_args.DEMO_RUN["steps"])
    best = max(r["eval_mean"] for r in offline)
    assert best >= LEARNED, ([r["eval_mean"] for r in offline],
                             [r["eval_mean"] for r in online])
    assert offline[-1]["updates"] == online[-1]["updates"]  # the same schedule
