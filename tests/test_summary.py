"""`dreamerjax summary`: the statistic re-derived from records, for any run."""

import json
import math
from pathlib import Path

import pytest

from dreamerjax import cli, summary
from dreamerjax.records import record_row

ROOT = Path(__file__).resolve().parents[1]


def _write(run: Path, evals: dict[int, dict[int, float]]) -> None:
    run.mkdir()
    with open(run / "records.jsonl", "w") as f:
        for rows, by_seed in evals.items():
            for seed, ret in by_seed.items():
                rec = record_row(seed, rows, rows // 2, [ret, ret + 2.0], [200, 200], {},
                                 None, 1.0)
                f.write(json.dumps(rec) + "\n")


def test_the_committed_protocol_run_gives_its_compare_A():
    """compare's A and summary's statistic are computed apart; they must agree."""
    run = ROOT / "results" / "cartpole_protocol"
    expected = json.loads((run / "summary.json").read_text())["A"]
    s = summary.summarize(run)
    assert s.stat_rows == (16000, 18000, 20000)
    assert math.isclose(s.stat, expected, rel_tol=1e-12)


def test_statistic_threshold_and_chosen_rows(tmp_path):
    run = tmp_path / "run"
    _write(run, {2: {0: -1000.0, 1: -900.0}, 4: {0: -300.0, 1: -200.0},
                 6: {0: -100.0, 1: -150.0}})
    s = summary.summarize(run, last=2, threshold=-200.0)
    # seed 0: mean(-299, -99) = -199; seed 1: mean(-199, -149) = -174
    assert s.per_seed == {0: -199.0, 1: -174.0}
    assert s.stat == pytest.approx(-186.5) and s.meets is True
    s = summary.summarize(run, rows=(2,), threshold=-200.0)
    assert s.stat == pytest.approx(-949.0) and s.meets is False
    text = summary.markdown(s)
    assert "| 4 | 2 | -299.0 | -199.0 | -249.0 |" in text and "**False**" in text


def test_an_unfinished_seed_or_absent_log_point_is_named(tmp_path):
    run = tmp_path / "run"
    _write(run, {2: {0: 1.0, 1: 2.0}, 4: {0: 3.0}})
    with pytest.raises(ValueError, match="seed 1 has no record at rows"):
        summary.summarize(run, last=1)
    with pytest.raises(ValueError, match="--rows 8: no log point"):
        summary.summarize(run, rows=(2, 8))
    with pytest.raises(ValueError, match="no records"):
        summary.summarize(tmp_path)


def test_cli_prints_json_and_refuses_bad_input(tmp_path, capsys):
    run = tmp_path / "run"
    _write(run, {2: {0: 1.0}, 4: {0: 3.0}})
    assert cli.main(["summary", str(run), "--last", "1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stat"] == 4.0 and out["stat_rows"] == [4] and out["meets"] is None
    assert cli.main(["summary", str(run), "--rows", "3"]) == 2
    assert "--rows 3" in capsys.readouterr().err


def test_plot_draws_both_runs_and_bad_plot_flags_are_named(tmp_path, capsys):
    run, other = tmp_path / "run", tmp_path / "ref"
    _write(run, {2: {0: -1000.0, 1: -900.0}, 4: {0: -300.0, 1: -200.0}})
    _write(other, {2: {0: -1100.0}})
    png = tmp_path / "curves.png"
    assert cli.main(["summary", str(run), "--last", "2", "--threshold", "-300",
                     "--plot", str(png), "--against", str(other),
                     "--against-label", "reference"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert "| 4 |" in capsys.readouterr().out  # the table is printed as without --plot
    for argv, flag in ((["--against", str(other)], "--against"),
                       (["--plot", str(tmp_path / "c.svg")], "--plot"),
                       (["--plot", str(tmp_path / "no" / "c.png")], "--plot"),
                       (["--plot", str(png), "--against", str(tmp_path / "nowhere")],
                        "nowhere")):
        assert cli.main(["summary", str(run), *argv]) == 2
        assert flag in capsys.readouterr().err
