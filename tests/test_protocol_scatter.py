"""benchmarks/protocol_scatter.py: per-seed values read as `dreamerjax compare` reads them,
and the permutation test's share counted over every group (small pools checked by hand)."""

import json

import pytest
from _benchmarks import load

scatter_mod = load("protocol_scatter.py")


def _records(tmp_path, name, per_seed):
    """A records folder: eval_mean per seed at the S1 rows (and a low 2,000-row point)."""
    d = tmp_path / name
    d.mkdir()
    lines = []
    for seed, vals in per_seed.items():
        lines.append({"seed": seed, "rows": 2000, "eval_mean": 10.0})
        for rows, v in zip((16000, 18000, 20000), vals, strict=True):
            lines.append({"seed": seed, "rows": rows, "eval_mean": v})
    (d / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(d)


def test_seed_values_are_s1(tmp_path):
    run = _records(tmp_path, "a", {0: (100, 200, 300), 3: (500, 500, 500)})
    assert scatter_mod.seed_values(run, (16000, 18000, 20000)) == {0: 200.0, 3: 500.0}
    assert scatter_mod.seed_values(run, (2000,)) == {0: 10.0, 3: 10.0}


def test_permutation_share_counts_every_group():
    # Pool 1..6, the tested run holds {1, 2}: of the 15 pairs only {1, 2} has a mean <= 1.5.
    runs = {"low": {0: 1.0, 1: 2.0}, "mid": {0: 3.0, 1: 4.0}, "high": {0: 5.0, 1: 6.0}}
    out = scatter_mod.scatter(runs, "low", draws=1000)
    assert out["permutation"] == {"run": "low", "groups": 15, "p_mean_at_or_below": 0.0667}
    assert out["pool"] == {"seeds": 6, "mean": 3.5, "sd": pytest.approx(1.9, abs=0.05)}
    # The same pool split {1, 3} / {2, 4} / {5, 6}: {1, 2} and {1, 3} have a mean <= 2.
    split = {"low": {0: 1.0, 1: 3.0}, "mid": {0: 2.0, 1: 4.0}, "high": runs["high"]}
    assert scatter_mod.scatter(split, "low", draws=1000)["permutation"][
        "p_mean_at_or_below"] == round(2 / 15, 4)


def test_resampled_range_shares(tmp_path):
    # Every seed at 300 (inside [241, 386]) or every seed at 100 (below it).
    inside = scatter_mod.scatter({"a": {0: 300.0, 1: 300.0, 2: 300.0}}, None, draws=500)
    assert inside["resampled_A"]["p_outside_range"] == 0.0
    below = scatter_mod.scatter({"a": {0: 100.0, 1: 100.0, 2: 100.0}}, None, draws=500)
    assert below["resampled_A"]["p_below_241"] == 1.0
    assert "permutation" not in below
