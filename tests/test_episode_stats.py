"""Per-log-point aggregates of the suites' per-episode log_* keys (records.episode_stats):
the reference's epstats means and the achievements' success rates, in records.jsonl."""

import importlib.util

import numpy as np
import pytest

from dreamerjax.run import records
from dreamerjax.run.records import episode_stats


def _ep(seed, **stats):
    return records.episode_row(seed=seed, worker=0, row_last=10, length=9, score=1.0,
                               terminal=True, **stats)


def test_craftax_keys_give_success_rates():
    keys = ("log_achievement_collect_wood", "log_achievement_place_table")
    eps = [_ep(0, log_achievement_collect_wood=1, log_achievement_place_table=0),
           _ep(0, log_achievement_collect_wood=1, log_achievement_place_table=1),
           _ep(0, log_achievement_collect_wood=0, log_achievement_place_table=0),
           _ep(0, log_achievement_collect_wood=1, log_achievement_place_table=0)]
    out = episode_stats(eps, keys)
    assert out["achievements"] == {"collect_wood": 0.75, "place_table": 0.25}
    # 0/1 per episode: the reference's mean over the episodes is the same rate.
    assert out["epstats"] == {"log_achievement_collect_wood": 0.75,
                              "log_achievement_place_table": 0.25}


def test_counts_give_the_fraction_unlocked_and_the_mean_count():
    """Crafter's keys are unlock counts (the reference's log_keys_max of them): the success
    rate counts an episode once; epstats keeps the reference's mean count."""
    eps = [_ep(1, log_achievement_eat_cow=3, log_reward=2.5),
           _ep(1, log_achievement_eat_cow=0, log_reward=0.5)]
    out = episode_stats(eps, ("log_reward", "log_achievement_eat_cow"))
    assert out["achievements"] == {"eat_cow": 0.5}
    assert out["epstats"] == {"log_reward": 1.5, "log_achievement_eat_cow": 1.5}


def test_other_log_keys_have_epstats_only_and_no_keys_nothing():
    out = episode_stats([_ep(0, log_reward_ctrl=-2.0), _ep(0, log_reward_ctrl=-4.0)],
                        ("log_reward_ctrl",))
    assert out == {"epstats": {"log_reward_ctrl": -3.0}}
    assert episode_stats([_ep(0), _ep(1)], ()) == {}  # CartPole: records unchanged
    assert episode_stats([], ()) == {}


def test_an_interval_without_episodes_keeps_the_keys_as_none():
    out = episode_stats([], ("log_achievement_defeat_zombie",))
    assert out == {"epstats": {"log_achievement_defeat_zombie": None},
                   "achievements": {"defeat_zombie": None}}
    # A non-finite value (written as null) is left out of the means.
    out = episode_stats([_ep(0, log_x=None), _ep(0, log_x=2.0)], ("log_x",))
    assert out["epstats"]["log_x"] == 2.0


def test_records_strict_json_and_tensorboard_tags():
    rec = records.record_row(0, 100, 0, [1.0], [5], {}, None, 1.0)
    rec.update(episode_stats([_ep(0, log_achievement_wake_up=1)],
                             ("log_achievement_wake_up",)))
    assert records.dumps(rec)  # strict JSON
    tags = records.tb_scalars(rec)
    assert tags["achievements/wake_up"] == 1.0
    assert tags["epstats/log_achievement_wake_up"] == 1.0


@pytest.mark.slow
def test_craftax_run_records_the_success_rates_of_its_interval(tmp_path):
    if importlib.util.find_spec("craftax") is None:
        pytest.skip("craftax not installed")
    from _runs import small_config

    from dreamerjax.run import driver

    # The shared small run (tests/_runs.py): 8 envs, log points every 80 rows (10 ticks).
    cfg = small_config("craftax_Craftax-Classic-Symbolic-v1", episode_limit=30)
    driver.train(cfg, (0, 1), str(tmp_path), progress=False)
    recs, eps = records.read_records(tmp_path), records.read_episodes(tmp_path)
    assert eps and all(1 <= e["length"] <= 30 for e in eps)
    for rec in recs:  # the episodes of this seed that ended in this log interval
        mine = [e for e in eps if e["seed"] == rec["seed"]
                and rec["rows"] - 80 < e["row_last"] * 8 <= rec["rows"]]
        names = sorted(k for k in eps[0] if k.startswith("log_achievement_"))
        assert len(names) == 22 and sorted(rec["achievements"]) == sorted(
            n.removeprefix("log_achievement_") for n in names)
        for n in names:
            want = np.mean([e[n] > 0 for e in mine]) if mine else None
            got = rec["achievements"][n.removeprefix("log_achievement_")]
            assert got == pytest.approx(want) if mine else got is None
            assert rec["epstats"][n] == got
