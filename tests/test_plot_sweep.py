"""benchmarks/plot_sweep.py: the figure of a bench sweep is drawn from its finished points
only, one series per dtype and seed count, ordered by model size."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "plot_sweep.py"
_spec = importlib.util.spec_from_file_location("plot_sweep", _PATH)
plot_sweep = importlib.util.module_from_spec(_spec)
sys.modules["plot_sweep"] = plot_sweep
_spec.loader.exec_module(plot_sweep)

COMMITTED = Path(__file__).resolve().parents[1] / "results" / "bench" / "tpu_sweep_20261207.jsonl"


def test_only_finished_points_are_drawn_in_size_order():
    rows = plot_sweep.points([str(COMMITTED)])
    assert rows and {r["status"] for r in rows} == {"ok"}
    lines = COMMITTED.read_text().splitlines()
    assert len(rows) == sum(json.loads(line)["status"] == "ok" for line in lines) < len(lines)
    for (dtype, seeds), pts in plot_sweep.series(rows).items():
        assert {(r["dtype"], r["seeds"]) for r in pts} == {(dtype, seeds)}
        order = [plot_sweep.SIZES.index(r["size"]) for r in pts]
        assert order == sorted(order)


def test_the_figure_is_written_with_256_colours(tmp_path):
    out = tmp_path / "sweep.png"
    assert plot_sweep.main([str(COMMITTED), "--out", str(out)]) == 0
    with Image.open(out) as im:
        assert im.mode == "P" and len(im.getcolors(256)) <= 256


def test_a_file_without_a_finished_point_is_refused(tmp_path):
    started = tmp_path / "s.jsonl"
    started.write_text(json.dumps({"status": "started", "size": "1m"}) + "\n")
    with pytest.raises(SystemExit, match="no finished point"):
        plot_sweep.points([str(started)])
