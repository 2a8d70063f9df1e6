"""records.py: record schema, strict JSON, S2 on a hand-worked example, window means, plots."""

import json
import math

import numpy as np
import pytest

from dreamerjax import records
from dreamerjax.plots import plot_curves
from dreamerjax.records import EpisodeTracker, RunWriter, record_row, window_means

SCHEMA_KEYS = {"side", "seed", "rows", "updates", "eval_mean", "eval_len_mean", "eval_returns",
               "s2_logged", "train", "retnorm", "wall_s"}


def _row(**kw):
    args = dict(side="dreamerjax", seed=np.int64(1), rows=2000, updates=np.int32(481),
                eval_returns=[10.0, 20.0, np.float32(30.0)], eval_lengths=[10.0, 20, 30],
                s2=float("nan"), train_means={"rec_loss": np.float32(0.5), "bad": math.inf},
                retnorm={"lo": 0.0, "hi": np.float32(3.0), "scale": 3.0}, wall_s=1.5)
    args.update(kw)
    return record_row(**args)


def test_record_row_schema_and_values():
    r = _row()
    assert SCHEMA_KEYS <= set(r)
    assert r["seed"] == 1 and type(r["seed"]) is int
    assert r["updates"] == 481 and type(r["updates"]) is int
    assert r["eval_mean"] == pytest.approx(20.0)
    assert r["eval_len_mean"] == pytest.approx(20.0)
    assert r["eval_returns"] == [10.0, 20.0, 30.0]
    assert r["eval_lengths"] == [10, 20, 30] and type(r["eval_lengths"][0]) is int
    assert r["s2_logged"] is None  # NaN S2 (an env without a finished episode)
    assert r["train"] == {"rec_loss": 0.5, "bad": None}
    assert r["retnorm"] == {"lo": 0.0, "hi": 3.0, "scale": 3.0}
    assert r["train_raw"] == r["train"]


def test_record_row_rejects_incomplete_retnorm():
    with pytest.raises(ValueError, match="scale"):
        _row(retnorm={"lo": 0.0, "hi": 1.0})


def test_non_finite_written_as_null(tmp_path):
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.add_records([_row(), _row(seed=2, s2=12.5)])
        w.add_episodes([dict(seed=0, worker=3, row_last=np.int64(9), length=9,
                             score=np.float32(9.0), terminal=np.bool_(True))])
        w.write_config({"b": {"x": float("nan")}, "a": (1, 2)})
    text = (tmp_path / "records.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    lines = [json.loads(line) for line in text.splitlines()]  # strict parse
    assert [r["seed"] for r in lines] == [1, 2]
    assert lines[0]["s2_logged"] is None and lines[1]["s2_logged"] == 12.5
    assert lines[0]["train"]["bad"] is None
    eps = records.read_episodes(tmp_path)
    assert eps == [{"seed": 0, "worker": 3, "row_last": 9, "length": 9, "score": 9.0,
                    "terminal": True}]
    cfg_text = (tmp_path / "config.json").read_text()
    assert json.loads(cfg_text) == {"a": [1, 2], "b": {"x": None}}
    assert cfg_text.index('"a"') < cfg_text.index('"b"')  # sorted keys


def test_writer_appends_and_resume_cuts_back(tmp_path):
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.add_records([_row(rows=2000)])
        w.add_episodes([dict(seed=1, worker=0, row_last=5, length=5, score=5.0,
                             terminal=True)])
        pos = w.positions()
        # Written after the checkpoint, then a crash:
        w.add_records([_row(rows=4000)])
        w.add_episodes([dict(seed=1, worker=0, row_last=9, length=4, score=4.0,
                             terminal=True)])
    assert [r["rows"] for r in records.read_records(tmp_path)] == [2000, 4000]
    with RunWriter(tmp_path, resume=pos, tensorboard=False) as w:
        assert [r["rows"] for r in records.read_records(tmp_path)] == [2000]
        assert [e["row_last"] for e in records.read_episodes(tmp_path)] == [5]
        w.add_records([_row(rows=4000)])
    assert [r["rows"] for r in records.read_records(tmp_path)] == [2000, 4000]


def test_tensorboard_event_files_per_seed(tmp_path):
    with RunWriter(tmp_path) as w:
        w.add_scalars(0, 2000, {"eval": {"eval_mean": 10.0}, "train/x": None})
        w.add_scalars(3, 2000, {"eval/eval_mean": np.float32(12.0)})
        assert w.positions()["tb_step"] == 2000
    for s in (0, 3):
        files = list((tmp_path / "tb" / f"seed_{s}").glob("events.out.tfevents.*"))
        assert files and files[0].stat().st_size > 0


# ---------------------------------------------------------------------------------------
# S2 (protocol 5.2)


def _tracker():
    t = EpisodeTracker()
    # env 0: episodes ending on rows 3, 7, 10 (scores 3, 4, 3)
    for row, score in ((3, 3.0), (7, 4.0), (10, 3.0)):
        t.add(0, 0, row, int(score), score, True)
    # env 1: rows 5, 10, 11 (scores 5, 5, 1)
    for row, score in ((5, 5.0), (10, 5.0), (11, 1.0)):
        t.add(0, 1, row, int(score), score, True)
    return t


def test_s2_hand_worked_boundary():
    t = _tracker()
    # N = 20, 2 envs: row_last <= 10 counts (inclusive boundary).
    # env 0: (3 + 4 + 3) / 3 = 10/3; env 1: (5 + 5) / 2 = 5  ->  (10/3 + 5) / 2 = 25/6.
    assert t.s2(0, 20, 2) == pytest.approx(25 / 6)
    # N = 18: row_last <= 9: env 0 (3 + 4) / 2 = 3.5; env 1: 5 -> 4.25.
    assert t.s2(0, 18, 2) == pytest.approx(4.25)
    # N = 22: row_last <= 11: env 1 becomes (5 + 5 + 1) / 3.
    assert t.s2(0, 22, 2) == pytest.approx((10 / 3 + 11 / 3) / 2)
    # N = 8: row_last <= 4: env 1 has no finished episode -> NaN.
    assert math.isnan(t.s2(0, 8, 2))
    # an unknown seed, or an env that never finished: NaN
    assert math.isnan(t.s2(5, 20, 2))
    assert math.isnan(t.s2(0, 21 * 3, 3))
    with pytest.raises(ValueError, match="multiple"):
        t.s2(0, 21, 2)


def test_s2_window_of_last_ten_and_seeds_apart():
    t = EpisodeTracker()
    for k in range(12):  # scores 0..11 ending on rows 2, 4, ..., 24
        t.add(7, 0, 2 * (k + 1), 2, float(k), True)
    t.add(8, 0, 2, 2, 100.0, True)
    # last 10 of 12 -> scores 2..11, mean 6.5
    assert t.s2(7, 24, 1) == pytest.approx(6.5)
    # at row 10 only 5 episodes (0..4) -> 2.0
    assert t.s2(7, 10, 1) == pytest.approx(2.0)
    assert t.s2(8, 24, 1) == 100.0
    assert t.s2_by_seed(24, 1, [7, 8]) == {7: pytest.approx(6.5), 8: 100.0}


def test_s2_matches_compare_recomputation():
    from dreamerjax.compare import s2_at

    rng = np.random.default_rng(0)
    t, eps = EpisodeTracker(), []
    for w in range(4):
        row = 0
        for _ in range(30):
            length = int(rng.integers(8, 40))
            row += length + 1 if row else length
            eps.append(dict(seed=0, worker=w, row_last=row, length=length,
                            score=float(length), terminal=True))
    eps.sort(key=lambda e: e["row_last"])
    t.add_rows(eps)
    for n in range(4, 4 * 900, 4 * 37):
        a, b = t.s2(0, n, 4), s2_at(eps, 4, n)
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_tracker_order_checked_and_serialisable():
    t = _tracker()
    with pytest.raises(ValueError, match="completion order"):
        t.add(0, 0, 10, 1, 1.0, True)
    blob = json.loads(json.dumps(t.to_dict()))
    u = EpisodeTracker.from_dict(blob)
    assert u.s2(0, 20, 2) == t.s2(0, 20, 2)
    assert u.seeds() == [0]
    # prune keeps what any later query needs
    for k in range(30):  # env 0: rows 3, 7, 10, then 12..41
        t.add(0, 0, 12 + k, 1, float(k), True)
    before = [t.s2(0, n, 2) for n in (60, 70, 84)]
    t.prune(60, 2)
    # 22 episodes end on rows <= 30: the last 10 stay, plus the 11 after row 30
    assert t.count(0, 0) == 21
    assert [t.s2(0, n, 2) for n in (60, 70, 84)] == before


# ---------------------------------------------------------------------------------------
# Window means


def test_window_means_skip_nan():
    import jax.numpy as jnp

    names = ("a", "b", "c")
    sums = {k: jnp.zeros(()) for k in names}
    counts = {k: jnp.zeros((), jnp.int32) for k in names}
    for a, b, c in ((1.0, np.nan, np.nan), (3.0, 4.0, np.nan), (np.nan, 6.0, np.nan)):
        sums, counts = records.window_accumulate(sums, counts, {"a": a, "b": b, "c": c})
    means = window_means(sums, counts)
    # NaN values do not count (reference Agg): a = (1 + 3) / 2, b = (4 + 6) / 2, c: none.
    assert means == {"a": 2.0, "b": 5.0, "c": None}
    # one shared count
    assert window_means({"x": np.float32(6.0)}, np.int32(3)) == {"x": 2.0}
    assert window_means({"x": 1.0}, 0) == {"x": None}


def test_window_means_per_seed():
    sums = {"a": np.array([2.0, 9.0]), "b": np.array([1.0, 0.0])}
    counts = {"a": np.array([2, 3]), "b": np.array([1, 0])}
    assert records.window_means_per_seed(sums, counts) == [
        {"a": 1.0, "b": 1.0}, {"a": 3.0, "b": None}]


# ---------------------------------------------------------------------------------------
# Plots


def test_plot_writes_png(tmp_path):
    recs = []
    for seed in (0, 1):
        for k, n in enumerate((400, 800, 1200)):
            recs.append(_row(seed=seed, rows=n, eval_returns=[10.0 * (k + 1) + seed],
                             s2=None if k == 0 else 5.0 * k))
    recs.append(_row(side="ref", seed=0, rows=800, s2=3.0))
    path = plot_curves(recs, tmp_path / "sub" / "curves.png", env="CartPole-v1")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
