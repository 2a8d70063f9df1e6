"""The comparison harness on small synthetic record sets built in tmp_path.

The passing set follows the full protocol (16 envs, 20,000 rows, 10 log points, 3 seeds)
with an episode layout whose S2 values are worked out by hand below.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from dreamerjax.config.defaults import Config, RunConfig, agent_config
from dreamerjax.tools.protocol import compare_main, inputs, statistics

PROTOCOL = inputs.schedule_of(RunConfig())
LOG_POINTS = tuple(range(2000, 20001, 2000))

# Hand-computed update counts: gate at 16 * 64 + 16 = 1040 rows, then one update per two rows.
UPDATES = {2000: 481, 4000: 1481, 6000: 2481, 8000: 3481, 10000: 4481, 12000: 5481,
           14000: 6481, 16000: 7481, 18000: 8481, 20000: 9481}

# Episode layout (same for every seed): worker 0 first runs one 500-step episode that ends by
# the time limit (rows 0..500, not terminal), then 30-step episodes (31 rows each); worker
# w >= 1 runs (20 + w)-step episodes throughout. Only episodes ending at row <= 1250 exist.
# S2(N) by hand (N / 16 = the last counted row):
#   N <= 6000: N/16 <= 375 < 500, worker 0 has no finished episode -> NaN.
#   N = 8000: row 500 -> worker 0 mean 500; workers 1..15 mean 20 + w, summing to 420;
#     S2 = (500 + 420) / 16 = 57.5.
#   N = 10000: row 625 -> worker 0 has 500 + 4 x 30 (500 + 31k <= 625, k <= 4):
#     mean 620 / 5 = 124; S2 = (124 + 420) / 16 = 34.0.
#   N = 20000: row 1250 -> worker 0 has 1 + 24 episodes, its last 10 are 30s:
#     S2 = (30 + 420) / 16 = 28.125.
S2_HAND = {2000: math.nan, 4000: math.nan, 6000: math.nan, 8000: 57.5, 10000: 34.0,
           20000: 28.125}

# Eval returns: seed s, log point k -> 10 returns with mean 20 * k + 10 * s, so by hand
# S1(s) = mean over k = 8, 9, 10 = 20 * 9 + 10 * s = 180 + 10 s: 180, 190, 200.
S1_HAND = {0: 180.0, 1: 190.0, 2: 200.0}


def episodes_for(seed: int, rows_per_env: int = 1250, num_envs: int = 16) -> list[dict]:
    out = []
    for w in range(num_envs):
        lengths = ([500] + [30] * 100) if w == 0 else [20 + w] * 200
        row = -1
        for length in lengths:
            if row + length + 1 > rows_per_env:
                break
            row += length + 1
            out.append({"seed": seed, "worker": w, "row_last": row, "length": length,
                        "score": float(length), "terminal": length != 500})
    return out


def eval_returns(seed: int, k: int) -> list[float]:
    mean = 20 * k + 10 * seed
    return [mean - 4.5 + i for i in range(10)]  # 10 values averaging to `mean`


def train_window(k: int, seed: int) -> dict:
    return {"vector_loss": 1.0 / k + seed * 0.01, "reward_loss": 0.5, "cont_loss": 0.1,
            "dyn_loss": 1.0, "rep_loss": 1.0, "actor_loss": 0.17, "critic_loss": 5.1,
            "replay_critic_loss": 4.0, "ent/action/mean": 0.5 - 0.01 * k,
            "adv/std": 0.3, "val/std": 0.05, "opt_grad_steps": float(UPDATES[2000 * k]),
            "rew/dist": 123.0}


def record(seed: int, k: int, side: str = "dreamerjax", s2=None) -> dict:
    returns = eval_returns(seed, k)
    mean = sum(returns) / 10
    return {"side": side, "seed": seed, "rows": 2000 * k, "updates": UPDATES[2000 * k],
            "eval_mean": mean, "eval_len_mean": mean, "eval_returns": returns,
            "s2_logged": s2, "train": train_window(k, seed),
            "retnorm": {"lo": 0.0, "hi": 0.5, "scale": 1.0}, "wall_s": 10.0 * k}


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_run(path, seeds=(0, 1, 2), log_s2=True, run: RunConfig | None = None,
             twohot_mean: str = "exact") -> str:
    """Our side: config.json, records.jsonl (s2_logged = S2 by hand), episodes.jsonl."""
    path.mkdir(parents=True, exist_ok=True)
    cfg = Config(agent=agent_config("1m", twohot_mean=twohot_mean), run=run or RunConfig(),
                 size="1m")
    (path / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2, sort_keys=True))
    recs, eps = [], []
    for s in seeds:
        seed_eps = episodes_for(s)
        eps += seed_eps
        for k in range(1, 11):
            s2 = statistics.s2_at(seed_eps, 16, 2000 * k) if log_s2 else None
            recs.append(record(s, k, s2=None if s2 is None or math.isnan(s2) else s2))
    write_jsonl(path / "records.jsonl", recs)
    write_jsonl(path / "episodes.jsonl", eps)
    return str(path)


def make_reference_per_seed(path, s1_offsets=(250.0, 300.0, 350.0)) -> str:
    """Section 5.1 layout: ref_s{s}/records.jsonl + episodes.jsonl; native names in
    train_raw, Ajax names in train (as the original protocol's reference records)."""
    for s, offset in enumerate(s1_offsets):
        d = path / f"ref_s{s}"
        d.mkdir(parents=True)
        recs = []
        for k in range(1, 11):
            r = record(s, k, side="ref")
            r["eval_returns"] = [x - 20 * k - 10 * s + offset for x in r["eval_returns"]]
            r["eval_mean"] = r["eval_len_mean"] = sum(r["eval_returns"]) / 10
            r["train_raw"] = dict(r["train"])
            r["train"] = {"rec_loss": 9.9}  # Ajax-named copy, must not be used
            recs.append(r)
        write_jsonl(d / "records.jsonl", [{k: v for k, v in r.items() if k != "seed"}
                                          for r in recs])  # seed from the directory name
        write_jsonl(d / "episodes.jsonl", episodes_for(s))
    return str(path)


def read_summary(directory) -> dict:
    return json.loads((directory / "summary.json").read_text())


def failed_checks(summary: dict) -> list[str]:
    return [c["name"] for c in summary["checks"] if c["status"] == "fail"]


# --- schedule -----------------------------------------------------------------------------


def test_protocol_schedule_matches_hand_counts():
    assert PROTOCOL.gate_step == 1040
    assert PROTOCOL.log_points == LOG_POINTS
    for n, want in UPDATES.items():
        assert PROTOCOL.expected_updates(n) == want
    assert PROTOCOL.expected_updates(1039) == 0
    assert PROTOCOL.expected_updates(1040) == 1
    assert PROTOCOL.expected_updates(1041) == 1
    assert PROTOCOL.expected_updates(1042) == 2


def test_small_schedule_gate_and_ratio():
    # 2 envs, batch 2 x 4 trained rows + 1 context: env 1's first 5-row item is transition
    # 2 * 4 + 2 = 10; ratio 4 / (2 * 4) = 1/2 update per row.
    s = inputs.schedule_of(RunConfig(num_envs=2, steps=40, eval_every=8, train_ratio=4.0,
                                     batch_size=2, batch_length=4, replay_context=1))
    assert s.gate_step == 10
    assert [s.expected_updates(n) for n in s.log_points] == [0, 4, 8, 12, 16]
    # batch smaller than the number of envs: the gate opens mid-tick (16 * 64 + 8).
    assert inputs.schedule_of(RunConfig(batch_size=8)).gate_step == 1032


# --- statistics ---------------------------------------------------------------------------


def test_s2_by_hand_small():
    # 2 envs. Worker 0: episodes (row_last, score) (3, 3), (10, 6), (13, 2);
    # worker 1: (5, 5). At N = 12 (row 6): worker 0 {3} -> 3, worker 1 {5} -> 5: S2 = 4.
    # At N = 20 (row 10): worker 0 {3, 6} -> 4.5: S2 = 4.75. At N = 26 (row 13): worker 0
    # {3, 6, 2} -> 11/3; with window 2 its last two {6, 2} -> 4.
    eps = [{"worker": 0, "row_last": 3, "score": 3.0},
           {"worker": 0, "row_last": 13, "score": 2.0},
           {"worker": 0, "row_last": 10, "score": 6.0},
           {"worker": 1, "row_last": 5, "score": 5.0}]
    assert statistics.s2_at(eps, 2, 12) == 4.0
    assert statistics.s2_at(eps, 2, 20) == 4.75
    assert statistics.s2_at(eps, 2, 26) == pytest.approx((11 / 3 + 5) / 2)
    assert statistics.s2_at(eps, 2, 26, window=2) == pytest.approx((4 + 5) / 2)
    # Row 5 is counted only from N = 10 (5 <= 10 / 2); before, worker 1 has none: NaN.
    assert math.isnan(statistics.s2_at(eps, 2, 9))
    assert statistics.s2_at(eps, 2, 10) == 4.0


def test_s2_and_s1_of_the_synthetic_set_equal_hand_values(tmp_path):
    rs = inputs.load_record_set(make_run(tmp_path / "run"))
    cur = statistics.curves(rs, (0, 1, 2), PROTOCOL)
    for s in (0, 1, 2):
        got = dict(zip(cur[s]["rows"], cur[s]["s2"], strict=False))
        for n, want in S2_HAND.items():
            if math.isnan(want):
                assert math.isnan(got[n]), (s, n)
            else:
                assert got[n] == pytest.approx(want), (s, n)
    assert statistics.s1_per_seed(rs, (0, 1, 2), statistics.S1_ROWS_FULL) == pytest.approx(S1_HAND)


def test_decision_rule():
    d = statistics.decide({0: 200.0, 1: 260.0}, {0: 241.0, 1: 300.0, 2: 386.0})
    assert (d.A, d.lo, d.hi, d.learns, d.within_range) == (230.0, 241.0, 386.0, False, False)
    d = statistics.decide({0: 400.0}, {0: 241.0, 1: 386.0})
    assert d.learns and not d.within_range
    d = statistics.decide({0: 300.0}, None)
    assert (d.lo, d.hi) == (241.0, 386.0) and d.learns and d.within_range


# --- compare_main -------------------------------------------------------------------------


def test_passing_run_without_reference_uses_the_protocols_reference_range(tmp_path, capsys):
    run = make_run(tmp_path / "run")
    assert compare_main(run, None, None, None) == 0
    out = tmp_path / "run"
    for name in ("compare.md", "summary.json", "compare.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert f"compare: wrote {out / 'compare.md'}, {out / 'summary.json'} and " \
           f"{out / 'compare.png'}" in printed  # where, with no --out
    assert "A = 190.0" in printed
    assert "![eval and S2 curves](compare.png)" in (out / "compare.md").read_text()
    summ = read_summary(out)
    assert (summ["lo"], summ["hi"]) == (241.0, 386.0)
    assert "the protocol's reference range" in summ["reference_source"]
    assert summ["A"] == pytest.approx(190.0)
    assert summ["LEARNS"] is False and summ["WITHIN_RANGE"] is False
    assert summ["S1"] == pytest.approx({"0": 180.0, "1": 190.0, "2": 200.0})
    assert summ["S2_final"] == pytest.approx({"0": 28.125, "1": 28.125, "2": 28.125})
    assert summ["reference_S1"] is None
    assert not failed_checks(summ)
    assert any(c["name"].startswith("ours: s2_logged") and c["status"] == "pass"
               for c in summ["checks"])
    md = (out / "compare.md").read_text()
    assert "[241, 386]" in md and "Known differences" in md
    assert "ref (diagnosis)" in md and "0.506 to 0.518" in md  # known 4,000-row values
    assert "| rew/min | - | -0.113 to -0.111 |" in md  # known even where ours lacks it
    assert "rew/dist" not in md  # */dist dropped
    assert "two-hot expectation: exact (default)" in md
    assert "exact mirror-difference sum" in md


@pytest.mark.parametrize("env, passes", [
    ("CartPole-v1", True), ("gym_CartPole-v1", True), ("Acrobot-v1", False)])
def test_protocol_env_either_path(tmp_path, env, passes):
    """The protocol runs on gymnax's CartPole (compiled) or Gymnasium's (host)."""
    run = make_run(tmp_path / "run", run=RunConfig(env=env))
    assert compare_main(run, None, None, None) == (0 if passes else 1)
    summ = read_summary(tmp_path / "run")
    assert ("protocol config (config.json, section 1)" in failed_checks(summ)) is not passes
    if passes:
        assert summ["A"] == pytest.approx(190.0)
        assert f"- env: `{env}`" in (tmp_path / "run" / "compare.md").read_text()


def test_report_names_the_runs_two_hot_summation(tmp_path):
    run = make_run(tmp_path / "run", twohot_mean="pairsum")
    assert compare_main(run, None, None, None) == 0
    md = (tmp_path / "run" / "compare.md").read_text()
    assert "two-hot expectation: pairsum (the reference's order; D1)" in md
    assert "used --twohot-mean pairsum" in md
    assert "exact mirror-difference sum;" not in md


def test_reference_per_seed_layout(tmp_path):
    run = make_run(tmp_path / "run")
    ref = make_reference_per_seed(tmp_path / "ref")
    out = tmp_path / "report"
    assert compare_main(run, ref, str(out), (0, 1, 2)) == 0
    summ = read_summary(out)
    assert summ["reference_S1"] == pytest.approx({"0": 250.0, "1": 300.0, "2": 350.0})
    assert (summ["lo"], summ["hi"]) == pytest.approx((250.0, 350.0))
    assert summ["LEARNS"] is False and summ["WITHIN_RANGE"] is False
    assert summ["reference_S2_final"]["0"] == pytest.approx(28.125)
    md = (out / "compare.md").read_text()
    assert "### reference" in md
    # The native train_raw names are used, not the Ajax-named `train` copy.
    ref_rs = inputs.load_record_set(ref)
    windows = statistics.window_table(ref_rs, (0, 1, 2))
    assert windows[4000]["vector_loss"].mean == pytest.approx(1 / 2 + 0.01)  # seeds 0-2
    assert not (tmp_path / "run" / "compare.md").exists()  # --out respected
    assert (out / "compare.png").is_file()


def test_reference_single_file_layout_and_ajax_names(tmp_path):
    run = make_run(tmp_path / "run")
    ref = tmp_path / "ajax"
    ref.mkdir()
    recs = []
    for s in (0, 1, 2):
        for k in range(1, 11):
            r = record(s, k, side="ajax", s2=30.0 + s)
            r["eval_returns"], r["retnorm"] = None, None
            r["eval_mean"] = r["eval_len_mean"] = 250.0 + 60 * s
            r["train"] = {"rec_loss": 0.7, "repval_loss": 3.0, "con_loss": None,
                          "n_updates": 1.0}
            recs.append(r)
    write_jsonl(ref / "ajax_records.jsonl", recs)
    out = tmp_path / "report"
    assert compare_main(run, str(ref), str(out), None) == 0
    summ = read_summary(out)
    assert summ["reference_S1"] == pytest.approx({"0": 250.0, "1": 310.0, "2": 370.0})
    assert summ["reference_S2_final"] == pytest.approx({"0": 30.0, "1": 31.0, "2": 32.0})
    assert "### reference (ajax)" in (out / "compare.md").read_text()
    w = statistics.window_table(inputs.load_record_set(ref), (0, 1, 2))[4000]
    assert w["vector_loss"].mean == pytest.approx(0.7)
    assert w["replay_critic_loss"].mean == pytest.approx(3.0)
    assert w["cont_loss"].n_bad == 3 and "n_updates" not in w


def test_reference_single_file_with_episodes(tmp_path):
    run = make_run(tmp_path / "run")
    ref = tmp_path / "ref"
    ref.mkdir()
    recs = [record(s, k, side="ref") for s in (0, 1) for k in range(1, 11)]
    write_jsonl(ref / "records.jsonl", recs)
    write_jsonl(ref / "episodes.jsonl", episodes_for(0) + episodes_for(1))
    assert compare_main(run, str(ref), str(tmp_path / "o"), None) == 0
    summ = read_summary(tmp_path / "o")
    assert summ["reference_seeds"] == [0, 1]
    assert (summ["lo"], summ["hi"]) == (180.0, 190.0)
    assert summ["LEARNS"] is True and summ["WITHIN_RANGE"] is True  # A = hi = 190


def strip_protocol_fields(run) -> None:
    """A plain run's records: those of make_run less side, s2_logged and train_raw."""
    recs = inputs.read_jsonl(run / "records.jsonl")
    write_jsonl(run / "records.jsonl", [{k: v for k, v in r.items()
                                         if k not in inputs.PROTOCOL_FIELDS} for r in recs])


def test_plain_run_without_protocol_fields(tmp_path, capsys):
    """A run's own records (none of the protocol's fields): read as ours, S2 comes from
    episodes.jsonl, and the statistics equal those of the same run with the fields."""
    make_run(tmp_path / "with")
    assert compare_main(str(tmp_path / "with"), None, None, None) == 0
    run = tmp_path / "plain"
    make_run(run)
    strip_protocol_fields(run)
    assert all("side" not in r for r in inputs.read_jsonl(run / "records.jsonl"))
    assert compare_main(str(run), None, None, None) == 0
    plain, full = read_summary(run), read_summary(tmp_path / "with")
    for key in ("A", "S1", "S2_final", "curves", "LEARNS", "WITHIN_RANGE"):
        assert plain[key] == full[key], key
    assert plain["S2_final"] == pytest.approx({"0": 28.125, "1": 28.125, "2": 28.125})
    status = {c["name"]: c["status"] for c in plain["checks"]}
    assert status["ours: s2_logged = S2 from episodes.jsonl"] == "skip"  # nothing logged
    assert status["ours: protocol fields (side, s2_logged, train_raw)"] == "skip"
    assert not any("protocol fields" in c["name"] for c in full["checks"])
    md = (run / "compare.md").read_text()
    assert "side dreamerjax" in md and "30 records without them" in md
    assert "| vector_loss |" in md  # train metrics under the names logged
    assert "A = 190.0" in capsys.readouterr().out


def test_plain_run_without_episodes_fails_and_half_fields_fail_the_schema(tmp_path):
    run = tmp_path / "plain"
    make_run(run)
    strip_protocol_fields(run)
    (run / "episodes.jsonl").unlink()  # S2 has nowhere to come from
    assert compare_main(str(run), None, None, None) == 1
    assert "ours: episode log consistency" in failed_checks(read_summary(run))
    # A record with some protocol fields but not all is not a plain run's: the schema names it.
    make_run(run)
    recs = inputs.read_jsonl(run / "records.jsonl")
    del recs[0]["side"]
    write_jsonl(run / "records.jsonl", recs)
    assert compare_main(str(run), None, None, None) == 1
    assert "ours: record schema (5.1)" in failed_checks(read_summary(run))


@pytest.mark.parametrize("breakage, check", [
    ("wrong_updates", "ours: updates"),
    ("missing_record", "ours: one record per seed per log point"),
    ("bad_tiling", "ours: episode log consistency"),
    ("bad_s2_logged", "ours: s2_logged"),
    ("short_returns", "ours: record schema"),
    ("missing_key", "ours: record schema"),
    ("truncated_terminal", "ours: episode log consistency"),
    ("config_steps", "protocol config"),
])
def test_broken_inputs_fail(tmp_path, breakage, check, capsys):
    run = tmp_path / "run"
    make_run(run, run=RunConfig(steps=18000) if breakage == "config_steps" else None)
    recs = inputs.read_jsonl(run / "records.jsonl")
    eps = inputs.read_jsonl(run / "episodes.jsonl")
    if breakage == "wrong_updates":
        recs[5]["updates"] += 1
    elif breakage == "missing_record":
        del recs[12]
    elif breakage == "bad_tiling":
        eps[3]["row_last"] += 1
    elif breakage == "bad_s2_logged":
        recs[-1]["s2_logged"] = 28.5
    elif breakage == "short_returns":
        recs[0]["eval_returns"] = recs[0]["eval_returns"][:9]
    elif breakage == "missing_key":
        del recs[0]["wall_s"]
    elif breakage == "truncated_terminal":
        eps[0]["terminal"] = True  # the 500-step episode is fine either way ...
        eps[1]["terminal"] = False  # ... but a 30-step one cannot end untruncated
    write_jsonl(run / "records.jsonl", recs)
    write_jsonl(run / "episodes.jsonl", eps)
    assert compare_main(str(run), None, None, None) == 1
    summ = read_summary(run)
    assert any(name.startswith(check) for name in failed_checks(summ)), summ["checks"]
    assert summ["A"] is None
    assert not (run / "compare.png").exists()
    err = capsys.readouterr().err
    assert "check failed" in err
    assert f"compare: wrote the failed checks to {run / 'compare.md'} and " \
           f"{run / 'summary.json'}" in err


def test_reference_check_failure_and_missing_seed(tmp_path):
    run = make_run(tmp_path / "run")
    ref = make_reference_per_seed(tmp_path / "ref")
    recs = inputs.read_jsonl(tmp_path / "ref" / "ref_s1" / "records.jsonl")
    recs[-1]["updates"] = 9480
    write_jsonl(tmp_path / "ref" / "ref_s1" / "records.jsonl", recs)
    out = tmp_path / "o"
    assert compare_main(run, ref, str(out), None) == 1
    assert "reference: updates" in " ".join(failed_checks(read_summary(out)))
    # Requesting a seed one side lacks fails too.
    assert compare_main(run, None, str(out), (0, 3)) == 1
    assert "ours: requested seeds present" in failed_checks(read_summary(out))


def test_unreadable_input_returns_2(tmp_path):
    assert compare_main(str(tmp_path / "nothing"), None, None, None) == 2
    run = make_run(tmp_path / "run")
    assert compare_main(run, str(tmp_path / "nothing"), None, None) == 2


def test_smoke_mode_uses_last_three_log_points(tmp_path):
    # A tiny run: 2 envs, 40 rows, log every 8 rows; gate at 10, ratio 1/2 (see above).
    run = tmp_path / "smoke"
    run.mkdir()
    rc = RunConfig(num_envs=2, steps=40, eval_every=8, eval_episodes=2, train_ratio=4.0,
                   batch_size=2, batch_length=4)
    (run / "config.json").write_text(json.dumps(Config(run=rc, size="1m").to_dict()))
    updates = {8: 0, 16: 4, 24: 8, 32: 12, 40: 16}
    eps = [{"seed": 0, "worker": w, "row_last": r, "length": r - p - 1, "score": r - p - 1.0,
            "terminal": True} for w in (0, 1) for p, r in ((-1, 9), (9, 19))]
    recs = [{"side": "dreamerjax", "seed": 0, "rows": n, "updates": u,
             "eval_mean": n / 2, "eval_len_mean": n / 2, "eval_returns": [n / 2 - 1, n / 2 + 1],
             "s2_logged": None, "train": {}, "retnorm": {"lo": 0, "hi": 0, "scale": 1},
             "wall_s": 1.0} for n, u in updates.items()]
    write_jsonl(run / "records.jsonl", recs)
    write_jsonl(run / "episodes.jsonl", eps)
    assert compare_main(str(run), None, None, None, smoke=True) == 0
    summ = read_summary(run)
    assert summ["S1"] == {"0": (12 + 16 + 20) / 3}  # eval at 24, 32, 40 rows
    # Row 19 is counted from N = 38 on: at 40 rows both workers average (9 + 9) / 2.
    assert summ["S2_final"] == {"0": 9.0}
    assert summ["mode"] == "smoke"
    # Full mode rejects the same run (not the protocol's config).
    assert compare_main(str(run), None, None, None, smoke=False) == 1


# --- the committed protocol runs ------------------------------------------------------------

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize("name", ["cartpole_protocol", "cartpole_protocol_pairsum",
                                  "cartpole_protocol_threads", "cartpole_protocol_tpu_10seeds",
                                  "cartpole_protocol_e3f0224_tpu_10seeds",
                                  "cartpole_protocol_tpu_3seeds",
                                  "cartpole_protocol_e3f0224_tpu_3seeds"])
def test_committed_protocol_run_reproduces_its_summary(tmp_path, name):
    """The harness, run again on a committed run's own records, passes every input check and
    gives the A, S1 and S2 that the committed summary.json and README report."""
    src = RESULTS / name
    for f in ("records.jsonl", "episodes.jsonl", "config.json"):
        shutil.copy(src / f, tmp_path / f)
    assert compare_main(str(tmp_path), None, None, None) == 0
    fresh, committed = read_summary(tmp_path), read_summary(src)
    assert not failed_checks(fresh)
    assert fresh["mode"] == "full" and fresh["seeds"] == json.loads(
        (src / "config.json").read_text())["seeds"]
    for key in ("A", "S1", "S2_final", "LEARNS", "WITHIN_RANGE"):
        assert fresh[key] == pytest.approx(committed[key]), key
    assert f"**{fresh['A']:.1f}**" in (src / "README.md").read_text()


def test_committed_e3f0224_run_beside_the_references_own(tmp_path):
    """Our e3f0224 protocol run against the reference's own e3f0224 seed 0: every input
    check passes, the reference's S1 is its three last evaluations' mean, and the window
    table compares e3f0224's own metric names on both sides."""
    src = RESULTS / "cartpole_protocol_e3f0224"
    ref = src / "reference_s0"
    assert compare_main(str(src), str(ref), str(tmp_path), None) == 0
    fresh = read_summary(tmp_path)
    assert not failed_checks(fresh)
    evals = {r["rows"]: r["eval_mean"] for r in inputs_records(ref)}
    s1 = sum(evals[n] for n in statistics.S1_ROWS_FULL) / 3
    assert fresh["lo"] == fresh["hi"] == pytest.approx(s1)
    committed = read_summary(src / "beside_reference_s0")
    for key in ("A", "lo", "hi", "LEARNS", "WITHIN_RANGE"):
        assert fresh[key] == pytest.approx(committed[key]), key
    report = (tmp_path / "compare.md").read_text()
    rows = [line for line in report.splitlines() if line.startswith("| loss/dyn |")]
    assert len(rows) == 10 and rows[-1].count("[") == 2  # at 20,000 rows: both sides


def inputs_records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()
            if line.strip()]


# ---------------------------------------------------------------------------------------
# S2 (protocol 5.2): computed once, from episodes.jsonl


def test_s2_window_of_last_ten_and_no_episode_yet():
    eps = [{"worker": 0, "row_last": 2 * (k + 1), "score": float(k)} for k in range(12)]
    # last 10 of 12 -> scores 2..11, mean 6.5; at row 10 only 5 episodes (0..4) -> 2.0;
    # at N = 9 those ending on rows 2, 4, 6, 8 -> 1.5
    assert statistics.s2_at(eps, 1, 24) == pytest.approx(6.5)
    assert statistics.s2_at(eps, 1, 10) == pytest.approx(2.0)
    assert statistics.s2_at(eps, 1, 9) == pytest.approx(1.5)
    assert math.isnan(statistics.s2_at([], 1, 24))  # a seed without episodes
    assert math.isnan(statistics.s2_at(eps, 2, 48))  # env 1 never finished one


def test_resumed_run_audits_the_s2_it_logged(tmp_path):
    """A run resumed from one whose records logged S2: the records written after the
    resume carry none of the protocol's fields. The logged values are still audited and
    the statistics are the whole run's, S2 from episodes.jsonl."""
    run = tmp_path / "run"
    make_run(run)
    recs = inputs.read_jsonl(run / "records.jsonl")
    resumed = [r if r["rows"] <= 10000 else
               {k: v for k, v in r.items() if k not in inputs.PROTOCOL_FIELDS} for r in recs]
    write_jsonl(run / "records.jsonl", resumed)
    assert compare_main(str(run), None, None, None) == 0
    summ = read_summary(run)
    status = {c["name"]: c["status"] for c in summ["checks"]}
    assert status["ours: s2_logged = S2 from episodes.jsonl"] == "pass"
    assert summ["S2_final"] == pytest.approx({"0": 28.125, "1": 28.125, "2": 28.125})
    resumed[0]["s2_logged"] = 1.0  # a logged value that the episodes do not give
    write_jsonl(run / "records.jsonl", resumed)
    assert compare_main(str(run), None, None, None) == 1
    assert "ours: s2_logged = S2 from episodes.jsonl" in failed_checks(read_summary(run))


def test_schedule_follows_the_runs_reference_version():
    """compare's input check counts updates with the replay gate of the version the run
    reproduced (config.json's agent.reference): HEAD opens it at batch_size x batch_length
    items, 29eb964 at batch_size, on the same protocol otherwise."""
    old = json.loads((RESULTS / "cartpole_protocol" / "config.json").read_text())
    head = json.loads((RESULTS / "cartpole_protocol_e3f0224" / "config.json").read_text())
    assert head["agent"]["reference"] == "e3f0224"
    old_s, head_s = inputs.schedule_from_config(old), inputs.schedule_from_config(head)
    assert [old_s.expected_updates(n) for n in (2000, 4000, 20000)] == [481, 1481, 9481]
    assert [head_s.expected_updates(n) for n in (2000, 4000, 20000)] == [0, 977, 8977]


@pytest.mark.parametrize("broken", [False, True])
def test_compare_never_touches_the_runs_own_curves_and_writes_only_into_out(tmp_path, broken):
    """A run's curves.png (training's plot) is the same byte for byte after compare, with
    --out nothing of compare's lands in the run, passing or with a failed check."""
    from dreamerjax.viz import plots

    run = Path(make_run(tmp_path / "run"))
    plots.plot_curves(inputs.read_jsonl(run / "records.jsonl"), run / "curves.png",
                      env="CartPole-v1")
    if broken:  # an input check fails
        recs = inputs.read_jsonl(run / "records.jsonl")
        del recs[0]["wall_s"]
        write_jsonl(run / "records.jsonl", recs)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    out = tmp_path / "report"
    assert compare_main(str(run), None, str(out), None) == (1 if broken else 0)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    written = {"compare.md", "summary.json"} | (set() if broken else {"compare.png"})
    assert {p.name for p in out.iterdir()} == written
    assert compare_main(str(run), None, None, None) == (1 if broken else 0)  # into the run
    assert (run / "curves.png").read_bytes() == before["curves.png"]

