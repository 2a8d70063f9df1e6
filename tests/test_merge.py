"""`dreamerjax merge`: runs that trained different seeds, joined into one folder."""

import json
import math
from pathlib import Path

import pytest

from dreamerjax.run.records import read_jsonl
from dreamerjax.tools import cli, merge, summary

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = ROOT / "results" / "pendulum"


def _split(src: Path, dst: Path, seeds) -> Path:
    """A run folder holding only `seeds` of the committed run at src."""
    dst.mkdir()
    config = json.loads((src / "config.json").read_text())
    config["seeds"] = list(seeds)
    (dst / "config.json").write_text(json.dumps(config))
    for name in ("records.jsonl", "episodes.jsonl"):
        rows = [r for r in read_jsonl(src / name) if r["seed"] in seeds]
        (dst / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_split_and_merged_pendulum_is_the_run(tmp_path):
    """The committed 3-seed Pendulum run, split by seed and merged back (in another
    order): the same records, episodes, seeds and statistic."""
    runs = [_split(PENDULUM, tmp_path / f"s{s}", (s,)) for s in (2, 0, 1)]
    done = merge.merge(runs, tmp_path / "joined")
    joined = tmp_path / "joined"

    def key(r):
        return json.dumps(r, sort_keys=True)

    for name in ("records.jsonl", "episodes.jsonl"):
        assert sorted(map(key, read_jsonl(joined / name))) == \
            sorted(map(key, read_jsonl(PENDULUM / name)))
    assert done["seeds"] == [2, 0, 1]
    assert done["records"] == len(read_jsonl(PENDULUM / "records.jsonl"))
    original, merged = summary.summarize(PENDULUM), summary.summarize(joined)
    assert merged.per_seed == original.per_seed
    assert math.isclose(merged.stat, original.stat, rel_tol=1e-12)
    rows = [(r["rows"], r["seed"]) for r in read_jsonl(joined / "records.jsonl")]
    assert rows == sorted(rows)  # as a multi-seed run writes them


def test_configs_that_differ_are_refused_by_key(tmp_path):
    a = _split(PENDULUM, tmp_path / "a", (0,))
    b = _split(PENDULUM, tmp_path / "b", (1,))
    config = json.loads((b / "config.json").read_text())
    config["run"]["train_ratio"] = 256
    (b / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config key run\.train_ratio differs"):
        merge.merge([a, b], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_seed_in_two_runs_is_refused(tmp_path):
    a = _split(PENDULUM, tmp_path / "a", (0, 1))
    b = _split(PENDULUM, tmp_path / "b", (1, 2))
    with pytest.raises(ValueError, match=r"seeds \[1\] are already in an earlier run"):
        merge.merge([a, b], tmp_path / "out")


def test_records_of_an_unlisted_seed_are_refused(tmp_path):
    a = _split(PENDULUM, tmp_path / "a", (0,))
    config = json.loads((a / "config.json").read_text())
    config["seeds"] = [5]
    (a / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"records of seeds \[0\]"):
        merge.merge([a], tmp_path / "out")


def test_cli_merges_and_names_bad_input_in_one_line(tmp_path, capsys):
    a = _split(PENDULUM, tmp_path / "a", (0,))
    b = _split(PENDULUM, tmp_path / "b", (1,))
    assert cli.main(["merge", str(a), str(b), "--out", str(tmp_path / "j")]) == 0
    assert "merged seeds [0, 1]" in capsys.readouterr().out
    assert summary.summarize(tmp_path / "j").seeds == (0, 1)
    # merging again replaces the files; the runs themselves are untouched
    assert cli.main(["merge", str(a), str(b), "--out", str(tmp_path / "j")]) == 0
    assert len(read_jsonl(tmp_path / "j" / "records.jsonl")) == \
        len(read_jsonl(a / "records.jsonl")) + len(read_jsonl(b / "records.jsonl"))
    capsys.readouterr()
    assert cli.main(["merge", str(a), str(tmp_path / "nope"), "--out",
                     str(tmp_path / "k")]) == 2
    err = capsys.readouterr().err
    assert "no such run directory" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    assert cli.main(["merge", str(a), "--out", str(tmp_path / "run")]) == 2
    assert "checkpoints" in capsys.readouterr().err


@pytest.mark.parametrize("split", [((0,), (1,), (2,)), ((0,), (1, 2))],
                         ids=["one run per seed", "a run of one seed and one of two"])
def test_compare_on_the_protocol_run_split_by_seed_and_merged(tmp_path, split):
    """The committed CartPole protocol run, split into runs of one seed or of several,
    merged: compare passes its input checks and writes the same summary.json (A, S1 and S2
    per seed)."""
    from dreamerjax.tools.protocol import compare_main

    protocol = ROOT / "results" / "cartpole_protocol"
    runs = [_split(protocol, tmp_path / f"s{i}", seeds) for i, seeds in enumerate(split)]
    merge.merge(runs, tmp_path / "joined")
    assert compare_main(str(tmp_path / "joined"), out=str(tmp_path / "cmp")) == 0
    got = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert got == json.loads((protocol / "summary.json").read_text())
