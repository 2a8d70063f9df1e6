"""records.py: record schema, strict JSON, the one JSONL reader; metric windows; plots."""

import json
import math

import numpy as np
import pytest

from dreamerjax.data import metric_window
from dreamerjax.run import records
from dreamerjax.run.records import RunWriter, plot_run, record_row
from dreamerjax.viz.plots import plot_curves

SCHEMA_KEYS = {"seed", "rows", "updates", "eval_mean", "eval_len_mean", "eval_returns",
               "eval_lengths", "train_return", "train", "retnorm", "wall_s"}


def _row(**kw):
    args = dict(seed=np.int64(1), rows=2000, updates=np.int32(481),
                eval_returns=[10.0, 20.0, np.float32(30.0)], eval_lengths=[10.0, 20, 30],
                train_return=float("nan"),
                train_means={"rec_loss": np.float32(0.5), "bad": math.inf},
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
    assert r["train_return"] is None  # NaN: no training episode ended in the interval
    assert r["train"] == {"rec_loss": 0.5, "bad": None}
    assert r["retnorm"] == {"lo": 0.0, "hi": 3.0, "scale": 3.0}


def test_record_row_rejects_incomplete_retnorm():
    with pytest.raises(ValueError, match="scale"):
        _row(retnorm={"lo": 0.0, "hi": 1.0})


def test_non_finite_written_as_null(tmp_path):
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.add_records([_row(), _row(seed=2, train_return=12.5)])
        w.add_episodes([records.episode_row(seed=0, worker=3, row_last=np.int64(9), length=9,
                                            score=np.float32(9.0), terminal=np.bool_(True))])
        w.write_config({"b": {"x": float("nan")}, "a": (1, 2)})
    text = (tmp_path / "records.jsonl").read_text()
    assert "NaN" not in text and "Infinity" not in text
    lines = [json.loads(line) for line in text.splitlines()]  # strict parse
    assert [r["seed"] for r in lines] == [1, 2]
    assert lines[0]["train_return"] is None and lines[1]["train_return"] == 12.5
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
        w.add_episodes([records.episode_row(seed=1, worker=0, row_last=5, length=5,
                                            score=5.0, terminal=True)])
        pos = w.positions()
        # Written after the checkpoint, then a crash:
        w.add_records([_row(rows=4000)])
        w.add_episodes([records.episode_row(seed=1, worker=0, row_last=9, length=4,
                                            score=4.0, terminal=True)])
        with (tmp_path / "records.jsonl").open("a") as f:
            f.write('{"seed": 1, "ro')  # a torn line
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
    for s in (0, 3):
        files = list((tmp_path / "tb" / f"seed_{s}").glob("events.out.tfevents.*"))
        assert files and files[0].stat().st_size > 0


# ---------------------------------------------------------------------------------------
# Window means


def _window(values_by_name):
    window = metric_window.init(values_by_name)
    steps = max(len(v) for v in values_by_name.values())
    for i in range(steps):
        window = metric_window.add(window, {k: v[i] for k, v in values_by_name.items()})
    return window


def test_window_mean_as_the_reference_aggregates():
    """NaN skipped, +-inf kept (embodied/core/agg.py:80-116 @29eb964): a window with +inf
    has mean +inf, one with +inf and -inf has NaN; nothing counted gives None."""
    nan, inf = math.nan, math.inf
    w = _window({"a": [1.0, 3.0, nan], "b": [nan, 4.0, 6.0], "c": [nan, nan, nan],
                 "d": [1.0, inf, 2.0], "e": [-inf, 1.0, 1.0], "f": [inf, -inf, 1.0]})
    out = metric_window.result(jax_to_numpy(w))
    assert out["a"] == 2.0 and out["b"] == 5.0 and out["c"] is None
    assert out["d"] == inf and out["e"] == -inf and math.isnan(out["f"])
    # JSON has no inf: a record writes these as null
    assert record_row(1, 2, 3, None, None, out, None, 0.0)["train"]["d"] is None


def test_window_mean_keeps_digits_and_resets():
    w = _window({"big": [637511.0] * 500 + [637512.0] * 500})
    assert metric_window.result(jax_to_numpy(w))["big"] == pytest.approx(637511.5, abs=1e-2)
    empty = metric_window.result(jax_to_numpy(metric_window.reset(w)))
    assert empty == {"big": None}


def jax_to_numpy(tree):
    import jax
    return jax.tree.map(np.asarray, tree)


def test_read_jsonl_ignores_only_a_torn_last_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert records.read_jsonl(path) == [{"a": 1}, {"a": 2}]
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(ValueError, match="x.jsonl:2"):
        records.read_jsonl(path)
    assert records.read_jsonl(tmp_path / "missing.jsonl") == []


# ---------------------------------------------------------------------------------------
# Plots


def test_plot_writes_png(tmp_path):
    recs = []
    for seed in (0, 1):
        for k, n in enumerate((400, 800, 1200)):
            recs.append(_row(seed=seed, rows=n, updates=40 * k,
                             eval_returns=[10.0 * (k + 1) + seed],
                             train_return=None if k == 0 else 5.0 * k))
    path = plot_curves(recs, tmp_path / "sub" / "curves.png", env="CartPole-v1")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    with RunWriter(tmp_path / "run", tensorboard=False) as w:
        w.add_records(recs)
        w.write_config({"run": {"env": "CartPole-v1"}})
    names = sorted(p.name for p in plot_run(tmp_path / "run"))
    assert names == ["curves.png", "metrics_retnorm.png"]
