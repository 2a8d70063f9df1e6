"""`dreamerjax summary`: the statistic re-derived from records, for any run."""

import json
import math
from pathlib import Path

import pytest

from dreamerjax.run.records import record_row
from dreamerjax.tools import cli, summary

ROOT = Path(__file__).resolve().parents[1]


def _write(run: Path, evals: dict[int, dict[int, float]]) -> None:
    run.mkdir()
    with open(run / "records.jsonl", "w") as f:
        for rows, by_seed in evals.items():
            for seed, ret in by_seed.items():
                rec = record_row(seed, rows, rows // 2, [ret, ret + 2.0], [200, 200],
                                 {"val/mean": ret / 10}, None, 1.0)
                f.write(json.dumps(rec) + "\n")


def test_the_committed_protocol_run_gives_its_compare_A():
    """compare's A and summary's statistic are computed apart; they must agree."""
    run = ROOT / "results" / "cartpole_protocol"
    expected = json.loads((run / "summary.json").read_text())["A"]
    s = summary.summarize(run)
    assert s.stat_rows == (16000, 18000, 20000)
    assert math.isclose(s.stat, expected, rel_tol=1e-12)


def test_gzipped_records_are_read_where_only_they_exist(tmp_path):
    """A results folder may keep records.jsonl.gz alone; the plain file wins where both are."""
    import gzip

    run = tmp_path / "run"
    _write(run, {2: {0: 10.0}, 4: {0: 30.0}})
    plain = (run / "records.jsonl").read_bytes()
    (run / "records.jsonl.gz").write_bytes(gzip.compress(plain))
    (run / "records.jsonl").write_text(plain.decode().splitlines()[0] + "\n")
    assert summary.summarize(run, last=1).per_seed == {0: 11.0}  # the plain file's one point
    (run / "records.jsonl").unlink()
    assert summary.summarize(run, last=1).per_seed == {0: 31.0}
    committed = summary.summarize(ROOT / "results" / "dmc_cartpole_tpu" / "balance")
    assert committed.stat_rows == (46080, 48640, 51200)


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
    for argv, flag in ((["--metrics", "val/mean"], "--metrics"),
                       (["--plot", str(tmp_path / "c.svg")], "--plot"),
                       (["--plot", str(tmp_path / "no" / "c.png")], "--plot"),
                       (["--plot", str(png), "--against", str(tmp_path / "nowhere")],
                        "nowhere")):
        assert cli.main(["summary", str(run), *argv]) == 2
        assert flag in capsys.readouterr().err


def test_against_puts_both_runs_and_their_metrics_side_by_side(tmp_path, capsys):
    """Only the log points and seeds both runs have; each value from its own records."""
    run, other = tmp_path / "run", tmp_path / "ref"
    _write(run, {2: {0: -1000.0, 1: -900.0}, 4: {0: -300.0, 1: -200.0}})
    _write(other, {2: {0: -1100.0}, 4: {0: -500.0}, 6: {0: -100.0}})
    argv = ["summary", str(run), "--last", "1", "--against", str(other), "--label", "ours",
            "--against-label", "ref", "--metrics", "val/mean"]
    assert cli.main(argv) == 0
    head = "| rows | seed | updates (ours) | updates (ref) | eval_mean (ours) |"
    out = capsys.readouterr().out.split(head)
    assert len(out) == 2 and "| 4 | 2 | -299.0 | -199.0 | -249.0 |" in out[0]
    lines = out[1].splitlines()[2:]
    assert lines == ["| 2 | 0 | 1 | 1 | -999.0 | -1,099.0 | -100.000 | -110.000 |",
                     "| 4 | 0 | 2 | 2 | -299.0 | -499.0 | -30.000 | -50.000 |"]
    assert cli.main([*argv, "--format", "json"]) == 0
    side = json.loads(capsys.readouterr().out)["beside"]
    assert [(e["rows"], e["seed"]) for e in side] == [(2, 0), (4, 0)]
    assert side[0]["runs"]["ref"] == {"updates": 1, "eval_mean": -1099.0, "val/mean": -110.0}
    for bad, flag in ((["--metrics", "val/nope"], "val/nope"),
                      (["--label", "ref"], "--against-label")):
        assert cli.main([*argv, *bad]) == 2
        assert flag in capsys.readouterr().err
    lone = tmp_path / "lone"
    _write(lone, {2: {5: 1.0}})
    assert cli.main(["summary", str(run), "--against", str(lone)]) == 2
    assert "share no log point" in capsys.readouterr().err


def test_seeds_selects_the_seeds_summarised_and_an_absent_one_is_named(tmp_path, capsys):
    run = tmp_path / "run"
    _write(run, {2: {0: -1000.0, 1: -900.0}, 4: {0: -300.0, 1: -200.0}})
    s = summary.summarize(run, last=1, seeds=(1,))
    assert s.seeds == (1,) and s.per_seed == {1: -199.0}
    assert cli.main(["summary", str(run), "--seeds", "0", "--last", "1"]) == 0
    assert "| 4 | 2 | -299.0 | -299.0 |" in capsys.readouterr().out
    assert cli.main(["summary", str(run), "--seeds", "0", "7"]) == 2
    assert "--seeds 7" in capsys.readouterr().err


def test_against_labels_the_columns_by_the_runs_folders(tmp_path, capsys):
    """Without --label / --against-label the table names each run by its folder, and by
    its parent too when the folders share a name."""
    run, other = tmp_path / "ours", tmp_path / "theirs"
    _write(run, {2: {0: 1.0}})
    _write(other, {2: {0: 2.0}})
    assert cli.main(["summary", str(run), "--last", "1", "--against", str(other)]) == 0
    assert "| updates (ours) | updates (theirs) |" in capsys.readouterr().out
    a, b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    a.parent.mkdir()
    b.parent.mkdir()
    _write(a, {2: {0: 1.0}})
    _write(b, {2: {0: 2.0}})
    assert cli.main(["summary", str(a), "--last", "1", "--against", str(b)]) == 0
    assert "| updates (a/run) | updates (b/run) |" in capsys.readouterr().out
