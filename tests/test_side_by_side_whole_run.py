"""benchmarks/side_by_side/whole_run.py and table.py --whole-run: how processes are
measured and counted, and the table and ratios printed from a result, without training
anything (the measured run is `python benchmarks/side_by_side/whole_run.py`)."""

import json
import os
import sys

import pytest
from _benchmarks import load

whole = load("side_by_side/whole_run.py")
table = load("side_by_side/table.py")


def test_bad_flags_are_refused(tmp_path):
    ref = ["--reference", str(tmp_path), "--work", str(tmp_path / "w")]
    with pytest.raises(SystemExit, match="--eval-every 2000 must .* divide --rows 3000"):
        whole.parse(ref + ["--rows", "3000"])
    with pytest.raises(SystemExit, match="--eval-every 100 must be a multiple of 16"):
        whole.parse(ref + ["--rows", "1600", "--eval-every", "100"])
    with pytest.raises(SystemExit, match="--rows 400: at least 1040"):
        whole.parse(ref + ["--rows", "400", "--eval-every", "400"])
    with pytest.raises(SystemExit, match="--reference: required"):
        whole.parse(["--work", str(tmp_path / "w")])
    with pytest.raises(SystemExit, match="--work: .* inside the repository"):
        whole.parse(ref[:2] + ["--work", os.path.join(whole.REPO, "x")])
    assert whole.parse(["--programs", "dreamerjax", "--work", str(tmp_path)]).rows == 4000


def test_processes_run_at_once_with_their_exit_codes_and_stdout(tmp_path):
    # 3 s alive after the allocation: time for the 0.1 s sampler to see both processes
    # even on a loaded machine (a process it never saw has no peak: None)
    code = ("import sys, time; x = bytearray(40 << 20); time.sleep(3); "
            "print('out', sys.argv[1]); sys.exit(int(sys.argv[1]))")
    cmds = [([sys.executable, "-c", code, str(i)], dict(os.environ), str(tmp_path / f"{i}.log"))
            for i in (0, 3)]
    run = whole.run_processes(cmds, str(tmp_path))
    assert run["returncodes"] == [0, 3]
    assert [s.strip() for s in run["stdout"]] == ["out 0", "out 3"]
    assert run["wall_s"] < 2 * 3  # both slept at the same time: one after another is 6 s
    # each holds its 40 MiB buffer (and an interpreter), less than this pytest process
    assert all(m is not None and 40 < m < 150 for m in run["maxrss_mib"]), run["maxrss_mib"]
    assert run["peak_rss_tree_mib"] > 80  # the two summed


def test_tree_rss_counts_children(tmp_path):
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        import time
        time.sleep(0.5)
        alone = whole.tree_rss_mib([child.pid])
        assert alone > 1
        assert whole.tree_rss_mib([os.getpid()]) >= alone  # this process's tree holds it
    finally:
        child.kill()
        child.wait()


def test_counts_take_each_seeds_last_record(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [{"seed": s, "rows": r, "updates": u}
             for r, u in ((2000, 481), (4000, 1481)) for s in (0, 1)]
    (run_dir / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    got = whole.counts("dreamerjax", str(tmp_path), {}, 2)
    assert got == {0: {"rows": 4000, "updates": 1481}, 1: {"rows": 4000, "updates": 1481}}
    ajax = {"stdout": ["noise\n" + json.dumps({"seeds": [0, 1], "rows_per_seed": 4000,
                                               "updates_per_seed": [1480, 1481]}) + "\n"]}
    assert whole.counts("ajax", str(tmp_path), ajax, 2) == {
        0: {"rows": 4000, "updates": 1480}, 1: {"rows": 4000, "updates": 1481}}
    assert whole.counts("ajax", str(tmp_path), {"stdout": ["crashed\n"]}, 2) is None


def _phase(walls: dict, seeds: int) -> dict:
    phase = {}
    for name, wall in walls.items():
        run = {"wall_s": wall, "peak_rss_tree_mib": 2048.0, "maxrss_mib": [2048.0],
               "returncodes": [0], "logs": []}
        per = {s: {"rows": 4000, "updates": 1481} for s in range(seeds)}
        phase[name] = whole.summarise(run, seeds, per)
    whole.add_ratios(phase)
    return phase


def test_rates_and_ratios_per_seed():
    phase = _phase({"reference": 1200.0, "dreamerjax": 300.0}, 3)
    ref, ours = phase["reference"], phase["dreamerjax"]
    assert ref["rows"] == 12000 and ref["updates"] == 3 * 1481
    assert ref["rows_per_s"] == pytest.approx(10.0)
    assert ref["updates_per_s"] == pytest.approx(3 * 1481 / 1200)
    assert ref["seconds_per_seed"] == pytest.approx(400.0)
    assert ref["per_seed_over_dreamerjax"] == pytest.approx(4.0)
    assert ours["per_seed_over_dreamerjax"] == pytest.approx(1.0)
    failed = _phase({"reference": 100.0, "dreamerjax": 1.0}, 1)
    failed["dreamerjax"]["error"] = "exit codes [2]"
    del failed["reference"]["per_seed_over_dreamerjax"]
    whole.add_ratios(failed)  # dreamerjax failed: nothing is divided by its seconds
    assert "per_seed_over_dreamerjax" not in failed["reference"]
    alone = _phase({"reference": 100.0}, 1)  # no dreamerjax in the phase: no ratio
    assert "per_seed_over_dreamerjax" not in alone["reference"]


def _result():
    return {
        "kind": "whole_run", "date": "2026-12-03T15:00:00Z",
        "machine": {"cpu": "Test CPU", "cores": 2},
        "config": {"rows_per_seed": 4000, "size": "1m", "num_envs": 16, "train_ratio": 512.0,
                   "eval_every": 2000, "eval_episodes": 10, "tiny": False,
                   "order": ["reference", "ajax", "dreamerjax"]},
        "loadavg_before": [0.1, 0.1, 0.1], "loadavg_after": [2.0, 1.5, 1.0],
        "skipped": {"ajax": "no Ajax environment: test"},
        "phases": {"1": _phase({"reference": 800.0, "dreamerjax": 200.0}, 1),
                   "3": _phase({"reference": 1200.0, "dreamerjax": 300.0}, 3)},
    }


def test_whole_run_table(tmp_path):
    text = table.whole_run_markdown(_result())
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")][1:]
    assert len(rows) == 4
    assert rows[0].startswith("| reference 29eb964") and "| 800 s |" in rows[0]
    assert rows[0].endswith("| 4.00x |")
    assert "3 processes at once | 3 | 1200 s | 10.0 |" in rows[2]
    assert rows[3].startswith("| dreamerjax") and rows[3].endswith("| 1.00x |")
    assert "ajax skipped: no Ajax environment: test" in text
    path = tmp_path / "whole_run_20261203.json"
    path.write_text(json.dumps(_result()))
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        table.main([str(path)])  # recognised by its kind, with or without --whole-run
    assert buf.getvalue() == text


def test_failed_program_is_shown_not_divided():
    r = _result()
    r["phases"]["1"]["reference"]["error"] = "exit codes [1]"
    text = table.whole_run_markdown(r)
    assert "failed: exit codes [1]" in text
