"""benchmarks/metrics_side_by_side.py on the committed CartPole e3f0224 runs (the reference
harness's seeds 0 and 1 against dreamerjax's seeds 0-2) and on small synthetic record
files whose parting is known."""

import json
import math
import pathlib

import pytest
from _benchmarks import load

mss = load("metrics_side_by_side.py")

DATA = pathlib.Path(__file__).resolve().parent.parent / "results" / "cartpole_protocol_e3f0224"
REFS = [str(DATA / "reference_s0"), str(DATA / "reference_s1")]
OURS = [str(DATA / f"seed{s}") for s in range(3)]


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    out = tmp_path_factory.mktemp("side_by_side")
    mss.main(["--reference", *REFS, "--ours", *OURS, "--out", str(out)])
    return out, json.loads((out / "metrics.json").read_text())


def _raw(path: str) -> list[dict]:
    return [json.loads(line) for line in open(pathlib.Path(path) / "records.jsonl")]


def test_committed_runs_match_the_training_metrics(committed):
    out, result = committed
    names = set(result["metrics"])
    assert {"loss/dyn", "loss/rep", "loss/rew", "loss/con", "loss/vector", "dyn_ent",
            "rep_ent", "ent/action", "ret", "ret_min", "ret_max", "adv", "adv_std", "adv_mag",
            "val", "tar", "loss/value", "loss/repval", "opt/grad_norm", "retnorm/scale",
            "eval_mean", "train_return"} <= names
    # the optimizer's names differ between the two programs: matched through the map
    assert result["metrics"]["opt/grad_norm"]["ours_name"] == "opt_grad_norm"
    assert result["metrics"]["opt/updates"]["ours_name"] == "opt_grad_steps"
    # our duplicate spellings have no reference counterpart
    assert "actor_loss" in result["only_ours"] and "actor_loss" not in names
    assert result["reference_seeds"] == ["s0", "s1"]
    assert result["our_seeds"] == ["s0", "s1", "s2"]
    md = (out / "metrics.md").read_text()
    assert "| loss/dyn |" in md and "| ent/action |" in md
    assert (out / "metrics.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_band_equals_a_hand_computation(committed):
    _, result = committed
    rows = 10000
    ref = [r["train"]["loss/value"] for p in REFS for r in _raw(p) if r["rows"] == rows]
    ours = [r["train"]["loss/value"] for p in OURS for r in _raw(p) if r["rows"] == rows]
    assert len(ref) == 2 and len(ours) == 3
    pt = next(p for p in result["metrics"]["loss/value"]["points"] if p["rows"] == rows)
    assert pt["reference"]["min"] == min(ref) and pt["reference"]["max"] == max(ref)
    assert pt["reference"]["mean"] == pytest.approx(sum(ref) / 2, rel=1e-12)
    assert pt["ours"]["mean"] == pytest.approx(sum(ours) / 3, rel=1e-12)
    assert sorted(pt["ours"]["seeds"].values()) == sorted(ours)
    assert pt["ratio"] == pytest.approx((sum(ours) / 3) / (sum(ref) / 2), rel=1e-12)
    assert pt["inside"] == (min(ref) <= sum(ours) / 3 <= max(ref))
    assert pt["overlap"] == (min(ours) <= max(ref) and min(ref) <= max(ours))


def test_partial_reference_points_are_not_judged(committed):
    # reference_s1 stops at 16,000 rows: its band there would be seed 0 alone
    _, result = committed
    m = result["metrics"]["loss/dyn"]
    assert [p["rows"] for p in m["points"] if not p["full"]] == [18000, 20000]
    assert m["end_rows"] == 16000
    # the first window has no updates (train null): no point at 2,000 rows
    assert m["points"][0]["rows"] == 4000
    # returns are recorded from the first record point on
    assert result["metrics"]["eval_mean"]["points"][0]["rows"] == 2000


def test_one_file_of_three_seeds_reads_as_three_folders(committed):
    # results/cartpole_protocol_e3f0224/records.jsonl is the three seeds joined
    _, result = committed
    merged = mss.compare(REFS, [str(DATA)])
    assert merged["our_seeds"] == ["s0", "s1", "s2"]
    assert merged["metrics"]["ent/action"] == result["metrics"]["ent/action"]


def _write(path: pathlib.Path, per_seed: dict[int, dict[int, float]], key="loss/dyn"):
    path.mkdir(parents=True)
    lines = [{"seed": s, "rows": n, "train": {key: v}, "eval_mean": 1.0}
             for s, points in per_seed.items() for n, v in points.items()]
    (path / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_shifted_out_of_band_parts_at_the_shift(tmp_path):
    rows = [2000, 4000, 6000, 8000, 10000]
    ref = _write(tmp_path / "ref", {0: {n: 1.0 for n in rows}, 1: {n: 2.0 for n in rows}})
    # ours inside the band [1, 2] to 4,000 rows, above it from 6,000 on
    shifted = {2000: 1.5, 4000: 1.2, 6000: 2.5, 8000: 2.6, 10000: 2.7}
    ours = _write(tmp_path / "ours", {0: shifted, 1: {n: v + 0.2 for n, v in shifted.items()}})
    m = mss.compare([ref], [ours])["metrics"]["loss/dyn"]
    assert m["first_parting"] == 6000
    assert m["apart_at"] == [6000, 8000, 10000] and m["first_apart"] == 6000
    assert m["end_ratio"] == pytest.approx(2.8 / 1.5)
    # back inside at the last point: no parting
    back = {**shifted, 10000: 1.9}
    ours2 = _write(tmp_path / "ours2", {0: back, 1: back})
    m2 = mss.compare([ref], [ours2])["metrics"]["loss/dyn"]
    assert m2["first_parting"] is None and m2["apart_at"] == [6000, 8000]


def test_record_points_aligned_by_nearest_row_or_bin(tmp_path):
    ref = _write(tmp_path / "ref", {0: {2000: 1.0, 4000: 3.0}})
    # ours logs every 1,000 rows, a few rows off the reference's points
    ours = _write(tmp_path / "ours", {0: {1000: 0.0, 2010: 1.0, 3000: 5.0, 4020: 7.0}})
    nearest = mss.compare([ref], [ours])["metrics"]["loss/dyn"]["points"]
    assert [(p["rows"], p["ours"]["mean"]) for p in nearest] == [(2000, 1.0), (4000, 7.0)]
    # bins (0, 2000], (2000, 4000], (4000, 6000]: 2,010 and 3,000 rows share one
    binned = mss.compare([ref], [ours], bin_rows=2000)["metrics"]["loss/dyn"]["points"]
    assert [(p["rows"], p["ours"]["mean"]) for p in binned] == [(2000, 0.0), (4000, 3.0)]
    # a record far from every reference point is left out, not stretched to one
    far = _write(tmp_path / "far", {0: {2000: 1.0, 5200: 9.0}})
    points = mss.compare([ref], [far])["metrics"]["loss/dyn"]["points"]
    assert [p["rows"] for p in points] == [2000]


def test_first_parting_counts_only_full_points():
    pts = [{"rows": n, "inside": i, "full": f}
           for n, i, f in ((1, True, True), (2, False, True), (3, True, False), (4, False, True))]
    assert mss.first_parting(pts, "inside") == 2
    assert mss.first_parting([], "inside") is None
    assert math.isnan(mss._nanmean([math.nan]))
