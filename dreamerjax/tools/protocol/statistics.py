"""The protocol's statistics (section 5.2, fixed before any result existed) and its
training-metric windows (section 5.4).

  S1 per seed = mean eval_mean at 16,000 / 18,000 / 20,000 rows (smoke: last 3 log points).
  S2(N) per seed = (1/E) sum_w m_w over the E envs, m_w = mean score of env w's last
    min(10, k_w) episodes with row_last <= N / E; NaN unless every k_w >= 1.
  A = mean of our S1; [lo, hi] = [min, max] of the reference S1 (the protocol's reference range
    241-386 when no reference is given); LEARNS = A >= lo; WITHIN_RANGE = lo <= A <= hi.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dreamerjax.tools.protocol.inputs import RecordSet, Schedule, is_num

S1_ROWS_FULL = (16000, 18000, 20000)
S2_WINDOW = 10  # episodes per env in the S2 rolling mean (Ajax's per-env ring of 10)
# The reference's three runs made with the pre-registered protocol (stock 29eb964, seeds
# 0-2): [min, max] of their S1, as the protocol's diagnosis reports them.
REFERENCE_RANGE_S1 = (241.0, 386.0)
REFERENCE_RANGE_SOURCE = (
    "the protocol's reference range: S1 of the reference's three runs made with the "
    "pre-registered protocol (danijar/dreamerv3 29eb964, seeds 0-2, stock two-hot decode), "
    "241-386")
# Section 5.4: Ajax train names that differ from the reference's (all others are shared).
AJAX_TO_REF = {
    "rec_loss": "vector_loss", "rec_loss_std": "vector_loss_std",
    "rew_loss": "reward_loss", "rew_loss_std": "reward_loss_std",
    "con_loss": "cont_loss", "con_loss_std": "cont_loss_std",
    "repval_loss": "replay_critic_loss", "repval_loss_std": "replay_critic_loss_std",
}
_STATS = ("mean", "std", "mag", "min", "max")
_FAMILIES = ("ent/action", "rand/action", "act/action", "adv", "rew", "weight", "val", "ret",
             "ret_normed", "replay_ret", "prior_ent", "post_ent")
# The compared (mapped) names of section 5.4, in its order, as reference train/<name> names.
MAPPED_NAMES: tuple[str, ...] = (
    *(f"{n}{s}" for n in ("vector_loss", "reward_loss", "cont_loss", "dyn_loss", "rep_loss",
                          "actor_loss", "critic_loss", "replay_critic_loss")
      for s in ("", "_std")),
    "opt_loss", "opt_grad_norm", "opt_update_norm", "opt_param_norm", "opt_grad_steps",
    *(f"{f}/{s}" for f in _FAMILIES for s in _STATS),
    "td_error", "ret_rate",
    *(f"{f}/{s}" for f in ("data_rew", "pred_rew") for s in ("max", "mean", "std")),
    "activation/embed",
)
RETNORM_NAMES = ("retnorm/lo", "retnorm/hi", "retnorm/scale")  # state at N, not window means

# ---------------------------------------------------------------------------------------
# Statistics (section 5.2)
# ---------------------------------------------------------------------------------------


def s2_at(episodes: list[dict], num_envs: int, rows: int, window: int = S2_WINDOW) -> float:
    """S2(N) of one seed: mean over envs of the mean score of each env's last `window`
    finished episodes with row_last <= N / num_envs; NaN unless every env has one.

    episodes: one seed's episode lines (worker, row_last, score).
    """
    total = 0.0
    for w in range(num_envs):
        done = sorted((e for e in episodes
                       if e["worker"] == w and e["row_last"] * num_envs <= rows),
                      key=lambda e: e["row_last"])
        if not done:
            return math.nan
        last = done[-window:]
        total += sum(e["score"] for e in last) / len(last)
    return total / num_envs


def s1_rows(sched: Schedule, smoke: bool) -> tuple[int, ...]:
    return sched.log_points[-3:] if smoke else S1_ROWS_FULL


def s1_per_seed(rs: RecordSet, seeds: tuple[int, ...], rows: tuple[int, ...]) -> dict[int, float]:
    """Mean eval_mean over the S1 log points, per seed."""
    out = {}
    for s in seeds:
        vals = {r["rows"]: r["eval_mean"] for r in rs.records if r["seed"] == s}
        out[s] = sum(float(vals[n]) for n in rows) / len(rows)
    return out


def curves(rs: RecordSet, seeds: tuple[int, ...], sched: Schedule) -> dict[int, dict]:
    """Per seed: {'rows': [...], 'eval_mean': [...], 's2': [...]} at every log point.

    S2 comes from episodes.jsonl when present, else from s2_logged (an Ajax record set).
    """
    out = {}
    for s in seeds:
        recs = sorted((r for r in rs.records if r["seed"] == s), key=lambda r: r["rows"])
        if rs.episodes is not None:
            eps = [e for e in rs.episodes if e["seed"] == s]
            s2 = [s2_at(eps, sched.num_envs, r["rows"]) for r in recs]
        else:
            s2 = [math.nan if r["s2_logged"] is None else float(r["s2_logged"]) for r in recs]
        out[s] = {"rows": [r["rows"] for r in recs],
                  "eval_mean": [float(r["eval_mean"]) for r in recs], "s2": s2}
    return out


@dataclass(frozen=True)
class Decision:
    A: float
    lo: float
    hi: float

    @property
    def learns(self) -> bool:
        return self.A >= self.lo

    @property
    def within_range(self) -> bool:
        return self.lo <= self.A <= self.hi


def decide(ours_s1: dict[int, float], ref_s1: dict[int, float] | None) -> Decision:
    a = sum(ours_s1.values()) / len(ours_s1)
    if ref_s1 is None:
        return Decision(a, *REFERENCE_RANGE_S1)
    return Decision(a, min(ref_s1.values()), max(ref_s1.values()))


# ---------------------------------------------------------------------------------------
# Training-metric windows (section 5.4)
# ---------------------------------------------------------------------------------------


def train_metrics(record: dict) -> dict[str, float]:
    """One record's window means under reference names (NaN for null).

    A reference record of the original protocol keeps its native names in train_raw (its
    `train` uses Ajax names); an Ajax record uses Ajax names; ours uses reference names.
    The retnorm state at N is added as retnorm/{lo,hi,scale}.
    """
    if record.get("side") in ("ref", "reference") and isinstance(record.get("train_raw"), dict):
        raw = record["train_raw"]
    else:
        raw = record["train"]
    out = {}
    for k, v in raw.items():
        if k.endswith("/dist") or k == "n_updates":
            continue
        out[AJAX_TO_REF.get(k, k)] = math.nan if v is None else float(v)
    if isinstance(record.get("retnorm"), dict):
        for k in ("lo", "hi", "scale"):
            v = record["retnorm"].get(k)
            if is_num(v):
                out[f"retnorm/{k}"] = float(v)
    return out


@dataclass(frozen=True)
class Summary3:
    """Mean / min / max over the seeds' finite values; n_bad = non-finite seeds."""

    mean: float
    lo: float
    hi: float
    n_bad: int


def window_table(rs: RecordSet, seeds: tuple[int, ...]) -> dict[int, dict[str, Summary3]]:
    """{rows: {name: Summary3 over seeds}} for every name of the mapped list present."""
    by_rows: dict[int, dict[str, list[float]]] = {}
    for r in rs.records:
        if r["seed"] not in seeds:
            continue
        slot = by_rows.setdefault(r["rows"], {})
        for k, v in train_metrics(r).items():
            slot.setdefault(k, []).append(v)
    out: dict[int, dict[str, Summary3]] = {}
    for n, metrics in sorted(by_rows.items()):
        out[n] = {}
        for k, vals in metrics.items():
            good = [v for v in vals if math.isfinite(v)]
            bad = len(vals) - len(good)
            if good:
                out[n][k] = Summary3(sum(good) / len(good), min(good), max(good), bad)
            else:
                out[n][k] = Summary3(math.nan, math.nan, math.nan, bad)
    return out


def nonfinite_windows(rs: RecordSet, seeds: tuple[int, ...]) -> list[str]:
    out = []
    for r in sorted(rs.records, key=lambda r: (r["seed"], r["rows"])):
        if r["seed"] in seeds:
            bad = sorted(k for k, v in train_metrics(r).items() if not math.isfinite(v))
            if bad:
                out.append(f"seed {r['seed']} rows {r['rows']}: {', '.join(bad)}")
    return out


def table_names(tables: list[dict[int, dict[str, Summary3]]]) -> list[str]:
    """Mapped names present on any side, in section 5.4's order, then retnorm; beside a
    reference, then every other name both sides have, sorted. Section 5.4 names 29eb964's
    metrics; at e3f0224 both sides also write that version's own (loss/dyn, opt/loss,
    ent/action, ...), which are the ones its reference writes."""
    present = [{k for w in t.values() for k in w} for t in tables]
    mapped = [n for n in (*MAPPED_NAMES, *RETNORM_NAMES) if n in set().union(*present)]
    if len(tables) < 2:
        return mapped
    return mapped + sorted(set.intersection(*present) - set(mapped))

