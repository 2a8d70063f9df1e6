"""benchmarks/side_by_side: the parts that decide what is measured and what is printed,
without timing anything (the timed run is `python benchmarks/side_by_side/run.py`)."""

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest
from _benchmarks import load

HERE = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "side_by_side"


run = load("side_by_side/run.py")
table = load("side_by_side/table.py")


def test_blob_hash_is_gits(tmp_path):
    p = tmp_path / "f.py"
    p.write_bytes(b"print('x')\n")
    want = hashlib.sha1(b"blob 11\0print('x')\n").hexdigest()
    assert run.git_blob_sha1(str(p)) == want
    proc = subprocess.run(["git", "hash-object", str(p)], capture_output=True, text=True,
                          check=False)
    if proc.returncode == 0:
        assert proc.stdout.strip() == want


def test_reference_checkout_is_refused_unless_29eb964(tmp_path):
    with pytest.raises(SystemExit, match="--reference: .* no dreamerv3/"):
        run.check_reference(str(tmp_path))
    (tmp_path / "dreamerv3").mkdir()
    (tmp_path / "embodied").mkdir()
    for rel in run.REFERENCE_BLOBS:
        (tmp_path / rel).write_text("not the reference\n")
    with pytest.raises(SystemExit, match="--reference: dreamerv3/.* is not the file of 29eb964"):
        run.check_reference(str(tmp_path))


def test_bad_flags_are_refused_before_anything_runs(tmp_path):
    ref = str(tmp_path)
    with pytest.raises(SystemExit, match="--rounds must be >= 1"):
        run.parse(["--reference", ref, "--rounds", "0", "--work", str(tmp_path / "w")])
    with pytest.raises(SystemExit, match="--work: .* inside the repository"):
        run.parse(["--reference", ref, "--work", os.path.join(run.REPO, "x")])


def test_stats_match_numpy_percentiles():
    np = pytest.importorskip("numpy")
    xs = [0.9, 0.31, 0.52, 0.47, 0.6, 0.33, 0.8, 0.41]
    s = run.stats(xs)
    assert s["median"] == pytest.approx(float(np.median(xs)))
    assert s["p10"] == pytest.approx(float(np.percentile(xs, 10)))
    assert s["p90"] == pytest.approx(float(np.percentile(xs, 90)))
    assert s["n"] == len(xs)


def _result(ref, ajax, ours):
    def prog(med, jax, seeds=1):
        rounds = [{"median": m} for m in med]
        return {"info": {"jax": jax, "seeds": seeds},
                "seconds_per_update_per_seed_rounds": med,
                "rounds": rounds,
                "all_rounds": {"median": sorted(med)[len(med) // 2], "p10": min(med),
                               "p90": max(med)},
                "compile_cold_s": 10.0, "peak_rss_mib": 1024.0}
    return {
        "date": "2026-12-01T07:00:00Z",
        "machine": {"cpu": "Test CPU", "cores": 2, "simd": ["avx2"]},
        "config": {"rounds": 3, "updates": 20, "warmup": 2, "batch_size": 16,
                   "batch_rows": 65, "dtype": "float32",
                   "order": ["reference", "ajax", "dreamerjax"]},
        "matmul_peak": {"before": {"matmul_peak_flops_per_s": 3e11},
                        "after": {"matmul_peak_flops_per_s": 2.9e11}},
        "loadavg_before": [1.0, 1.0, 1.0], "loadavg_after": [2.0, 1.5, 1.0],
        "programs": {"reference": prog(ref, "0.4.26"), "ajax": prog(ajax, "0.10.2"),
                     "dreamerjax": prog(ours, "0.10.2")},
    }


def test_table_ratios_come_from_the_one_run():
    md = table.markdown(_result([0.9, 0.8, 1.0], [0.6, 0.7, 0.65], [0.4, 0.5, 0.45]))
    rows = [ln for ln in md.splitlines() if ln.startswith("| reference")]
    assert len(rows) == 1 and "0.900, 0.800, 1.000" in rows[0] and "| 2.00x |" in rows[0]
    assert "2.00x the reference and 1.44x Ajax" in md
    assert "300, 290 GFLOP/s (before, after)" in md
    assert "before [1.0, 1.0, 1.0], after [2.0, 1.5, 1.0]" in md


def test_table_cli_reads_a_file(tmp_path):
    p = tmp_path / "side_by_side_20261201.json"
    p.write_text(json.dumps(_result([1.0], [0.5], [0.25])))
    proc = subprocess.run([sys.executable, str(HERE / "table.py"), str(p)],
                          capture_output=True, text=True, check=True)
    assert "4.00x the reference and 2.00x Ajax" in proc.stdout
