"""The input checks of section 5.3: a record set and our config.json hold what the protocol
fixed before the statistics are computed. Each check is a `Check` (pass, fail or skip);
`side_checks` runs a side's checks in order, the later ones only on a schema-valid set.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dreamerjax.tools.protocol.inputs import (
    CARTPOLE_ENVS,
    CARTPOLE_LIMIT,
    PROTOCOL_FIELDS,
    RecordSet,
    Schedule,
    is_int,
    is_num,
)
from dreamerjax.tools.protocol.statistics import s2_at

# Section 1 "This run" values our config.json must hold in full mode (run.*, size, agent).
PROTOCOL_CONFIG: dict[str, Any] = {
    "size": "1m",
    "run.env": CARTPOLE_ENVS,
    "run.num_envs": 16,
    "run.train_ratio": 512.0,
    "run.batch_size": 16,
    "run.batch_length": 64,
    "run.replay_context": 1,
    "run.steps": 20000,
    "run.eval_every": 2000,
    "run.eval_episodes": 10,
    "agent.rssm.deter": 512,
    "agent.rssm.hidden": 64,
    "agent.rssm.classes": 4,
    "agent.rssm.stoch": 32,
    "agent.rssm.blocks": 8,
    "agent.enc.units": 64,
    "agent.dec.units": 64,
    "agent.rewhead.units": 64,
    "agent.conhead.units": 64,
    "agent.actor.units": 64,
    "agent.critic.units": 64,
    "agent.compute_dtype": "float32",  # the reference side runs float32 too (REF_YAML_RUN)
}
# Keys a config.json written before they existed lacks: their value then.
PROTOCOL_CONFIG_BEFORE = {"agent.compute_dtype": "float32"}

# Keys of a reference config.yaml (embodied Config.save, dreamerv3/main.py:54) checked when
# present: the overrides of section 1. Widths and steps only in full mode (smoke may be tiny).
REF_YAML_RUN = {
    "run.num_envs": 16, "run.train_ratio": 512.0, "batch_size": 16, "batch_length": 65,
    "replay_context": 1, "jax.compute_dtype": "float32", "jax.param_dtype": "float32",
}
REF_YAML_FULL = {
    "run.steps": 20000, "dyn.rssm.deter": 512, "dyn.rssm.hidden": 64, "dyn.rssm.classes": 4,
    "dyn.rssm.stoch": 32, "enc.simple.units": 64, "dec.simple.units": 64,
    "rewhead.units": 64, "conhead.units": 64, "actor.units": 64, "critic.units": 64,
}

KNOWN_SIDES = ("dreamerjax", "ref", "reference", "ajax")

@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "pass", "fail" or "skip"
    detail: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "fail"


def _check(name: str, problems: list[str], ok_detail: str = "") -> Check:
    if problems:
        shown = "; ".join(problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return Check(name, "fail", shown + more)
    return Check(name, "pass", ok_detail)


def _finite(x: Any) -> bool:
    return is_num(x) and math.isfinite(x)


def _close(a: float, b: float, rel: float = 1e-3) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(b))


def _dotted(tree: dict, key: str) -> Any:
    node: Any = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(key)
        node = node[part]
    return node


def _same_value(actual: Any, expected: Any) -> bool:
    if isinstance(expected, tuple):  # any one of these
        return actual in expected
    if isinstance(expected, str):
        return actual == expected
    try:
        return float(actual) == float(expected)
    except (TypeError, ValueError):
        return False


def check_protocol_config(cfg: dict) -> Check:
    """Our config.json holds section 1's "This run" values (full mode only)."""
    problems = []
    for key, want in PROTOCOL_CONFIG.items():
        try:
            got = _dotted(cfg, key)
        except KeyError:
            if key not in PROTOCOL_CONFIG_BEFORE:
                problems.append(f"{key} missing")
                continue
            got = PROTOCOL_CONFIG_BEFORE[key]
        if not _same_value(got, want):
            problems.append(f"{key} = {got!r}, protocol {want!r}")
    run = cfg.get("run", {})
    cap, limit = run.get("replay_capacity", 0), run.get("episode_limit", 0)
    if cap and cap * run.get("num_envs", 1) < run.get("steps", 0):
        problems.append(f"run.replay_capacity = {cap} rows/env overwrites before the end")
    if limit not in (0, CARTPOLE_LIMIT):
        problems.append(f"run.episode_limit = {limit}, protocol 500 (the env's own)")
    return _check("protocol config (config.json, section 1)", problems)


_RECORD_SCHEMA: dict[str, tuple[str, ...]] = {
    # key: accepted kinds
    "side": ("str",), "seed": ("int",), "rows": ("int",), "updates": ("int",),
    "eval_mean": ("num",), "eval_len_mean": ("num",), "eval_returns": ("list", "null"),
    "s2_logged": ("num", "null"), "train": ("dict",), "retnorm": ("dict", "null"),
    "wall_s": ("num",),
}
_KIND = {
    "str": lambda v: isinstance(v, str), "int": is_int, "num": is_num,
    "list": lambda v: isinstance(v, list), "dict": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _record_problems(r: dict, side_role: str, sched: Schedule) -> list[str]:
    """Schema problems of one record; side_role 'ours' requires returns and retnorm."""
    where = f"seed {r.get('seed')} rows {r.get('rows')}"
    out = []
    for key, kinds in _RECORD_SCHEMA.items():
        if key not in r:
            out.append(f"{where}: '{key}' missing")
        elif not any(_KIND[k](r[key]) for k in kinds):
            out.append(f"{where}: '{key}' = {r[key]!r} is not {' or '.join(kinds)}")
    if out:
        return out
    if r["side"] not in KNOWN_SIDES:
        out.append(f"{where}: unknown side {r['side']!r}")
    returns = r["eval_returns"]
    needs_returns = side_role == "ours" or r["side"] != "ajax"
    if needs_returns and returns is None:
        out.append(f"{where}: eval_returns is null")
    if returns is not None:
        if len(returns) != sched.eval_episodes or not all(_finite(x) for x in returns):
            out.append(f"{where}: eval_returns has {len(returns)} entries (want "
                       f"{sched.eval_episodes} finite numbers)")
        elif not _close(r["eval_mean"], sum(returns) / len(returns)):
            out.append(f"{where}: eval_mean {r['eval_mean']} != mean(eval_returns)")
    if not _finite(r["eval_mean"]):
        out.append(f"{where}: eval_mean is not finite")
    if side_role == "ours" and r["retnorm"] is None:
        out.append(f"{where}: retnorm is null")
    if r["retnorm"] is not None and not all(is_num(r["retnorm"].get(k))
                                            for k in ("lo", "hi", "scale")):
        out.append(f"{where}: retnorm needs numbers lo, hi, scale")
    bad = [k for k, v in r["train"].items() if not (v is None or is_num(v))]
    if bad:
        out.append(f"{where}: train values not numbers: {bad[:3]}")
    return out


def check_schema(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    problems = [p for r in rs.records for p in _record_problems(r, side_role, sched)]
    if not problems and rs.side == "mixed":
        problems.append("records disagree on 'side'")
    return _check(f"{side_role}: record schema (5.1)", problems)


def check_eval_consistency(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    """CartPole: return = length, so eval_len_mean = eval_mean and returns lie in [0, 500]."""
    name = f"{side_role}: CartPole evaluation values"
    if not sched.is_cartpole:
        return Check(name, "skip", f"env {sched.env}")
    problems = []
    for r in rs.records:
        where = f"seed {r['seed']} rows {r['rows']}"
        if not _close(r["eval_len_mean"], r["eval_mean"]):
            problems.append(f"{where}: eval_len_mean {r['eval_len_mean']} != eval_mean")
        vals = r["eval_returns"] if r["eval_returns"] is not None else [r["eval_mean"]]
        if any(not 0 <= v <= sched.limit for v in vals):
            problems.append(f"{where}: a return outside [0, {sched.limit}]")
    return _check(name, problems)


def check_record_counts(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                        sched: Schedule) -> Check:
    """One record per seed per log point N = k * eval_every, k = 1 .. steps // eval_every."""
    want = list(sched.log_points)
    problems = []
    for s in seeds:
        rows = sorted(r["rows"] for r in rs.records if r["seed"] == s)
        if rows != want:
            missing = sorted(set(want) - set(rows))
            extra = sorted(set(rows) - set(want))
            dup = sorted({n for n in rows if rows.count(n) > 1})
            problems.append(f"seed {s}: {len(rows)} records, want {len(want)}"
                            + (f"; missing rows {missing}" if missing else "")
                            + (f"; unexpected rows {extra}" if extra else "")
                            + (f"; duplicate rows {dup}" if dup else ""))
    return _check(f"{side_role}: one record per seed per log point", problems,
                  f"{len(seeds)} seeds x {len(want)} log points")


def check_updates(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                  sched: Schedule) -> Check:
    problems = [
        f"seed {r['seed']} rows {r['rows']}: updates {r['updates']}, "
        f"expected {sched.expected_updates(r['rows'])}"
        for r in rs.records
        if r["seed"] in seeds and r["updates"] != sched.expected_updates(r["rows"])]
    last = sched.log_points[-1] if sched.log_points else 0
    return _check(f"{side_role}: updates = 1 + floor((N - {sched.gate_step}) * "
                  f"{sched.ratio}) for N >= {sched.gate_step}", problems,
                  f"{sched.expected_updates(last)} at {last} rows")


_EPISODE_SCHEMA = {"seed": is_int, "worker": is_int, "row_last": is_int,
                   "length": is_int, "score": is_num,
                   "terminal": lambda v: isinstance(v, bool)}


def _episode_problems(eps: list[dict], seed: int, sched: Schedule) -> list[str]:
    """Episode-log consistency for one seed (schema already checked)."""
    out = []
    by_worker: dict[int, list[dict]] = {}
    for e in eps:
        by_worker.setdefault(e["worker"], []).append(e)
    max_row = sched.rows_per_env  # the last env step of the run yields row steps / E
    for w, wes in sorted(by_worker.items()):
        where = f"seed {seed} worker {w}"
        if not 0 <= w < sched.num_envs:
            out.append(f"{where}: worker outside 0..{sched.num_envs - 1}")
        prev = -1  # row_last of the previous episode; the first starts at row 0
        for e in sorted(wes, key=lambda e: e["row_last"]):
            tag = f"{where} row_last {e['row_last']}"
            if e["row_last"] - prev != e["length"] + 1:
                out.append(f"{tag}: episode of length {e['length']} does not tile from row "
                           f"{prev + 1} (an episode of L steps spans L + 1 rows)")
            prev = e["row_last"]
            if e["row_last"] > max_row:
                out.append(f"{tag}: beyond the run's last row {max_row}")
            if sched.is_cartpole:
                if abs(e["score"] - e["length"]) > 1e-6:
                    out.append(f"{tag}: score {e['score']} != length {e['length']}")
                if not 1 <= e["length"] <= sched.limit:
                    out.append(f"{tag}: length {e['length']} outside 1..{sched.limit}")
                if not e["terminal"] and e["length"] != sched.limit:
                    out.append(f"{tag}: not terminal at length {e['length']} "
                               f"(only a {sched.limit}-step time limit ends without it)")
    return out


def check_episodes(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                   sched: Schedule) -> Check:
    name = f"{side_role}: episode log consistency"
    if rs.episodes is None:
        if side_role == "reference" and rs.side == "ajax":
            return Check(name, "skip", "Ajax record set: S2 from s2_logged")
        return _check(name, ["episodes.jsonl missing"])
    problems = []
    for i, e in enumerate(rs.episodes):
        bad = [k for k, ok in _EPISODE_SCHEMA.items() if k not in e or not ok(e[k])]
        if bad:
            problems.append(f"episode line {i + 1}: bad or missing {bad}")
    if problems:
        return _check(name, problems)
    for s in seeds:
        eps = [e for e in rs.episodes if e["seed"] == s]
        if not eps:
            problems.append(f"seed {s}: no episodes")
        problems += _episode_problems(eps, s, sched)
    return _check(name, problems, f"{len(rs.episodes)} episodes")


def check_s2_audit(rs: RecordSet, side_role: str, seeds: tuple[int, ...],
                   sched: Schedule) -> Check:
    """Logged S2 (s2_logged) equals S2 recomputed from episodes.jsonl at every N. Our
    records log none (a run resumed from one that did holds both kinds): only the values
    logged are audited there."""
    name = f"{side_role}: s2_logged = S2 from episodes.jsonl"
    recs = [r for r in rs.records if r["seed"] in seeds]
    if side_role == "ours":
        recs = [r for r in recs if r["s2_logged"] is not None]
    if rs.episodes is None or all(r["s2_logged"] is None for r in recs):
        return Check(name, "skip", "nothing to audit")
    problems = []
    for r in recs:
        eps = [e for e in rs.episodes if e["seed"] == r["seed"]]
        want = s2_at(eps, sched.num_envs, r["rows"])
        got = math.nan if r["s2_logged"] is None else float(r["s2_logged"])
        both_nan = math.isnan(got) and math.isnan(want)
        if not both_nan and not (math.isfinite(got) and math.isfinite(want)
                                 and _close(got, want)):
            problems.append(f"seed {r['seed']} rows {r['rows']}: logged {got}, "
                            f"recomputed {want}")
    return _check(name, problems)


def check_flush(rs: RecordSet, side_role: str, sched: Schedule) -> Check:
    """timing.json's flush_episodes = episodes with row_last = steps / E (when present)."""
    name = f"{side_role}: final flush step recorded"
    found = [(s, Path(d) / "timing.json") for s, d in rs.seed_dirs
             if (Path(d) / "timing.json").is_file()]
    if not found or rs.episodes is None:
        return Check(name, "skip", "no timing.json")
    problems = []
    for s, path in found:
        try:
            flush = json.loads(path.read_text()).get("flush_episodes")
        except (json.JSONDecodeError, AttributeError):
            flush = None
        n = sum(1 for e in rs.episodes
                if e["seed"] == s and e["row_last"] == sched.rows_per_env)
        if flush != n:
            problems.append(f"seed {s}: flush_episodes {flush!r}, {n} episodes end at row "
                            f"{sched.rows_per_env}")
    return _check(name, problems)


def check_done_markers(directory: str, side_role: str) -> Check:
    """Every *.DONE marker in the directory holds exit code 0 (launch wrappers)."""
    name = f"{side_role}: *.DONE exit codes"
    markers = sorted(Path(directory).glob("*.DONE"))
    if not markers:
        return Check(name, "skip", "no markers")
    bad = [f"{m.name} = {m.read_text().strip()!r}" for m in markers
           if m.read_text().strip() != "0"]
    return _check(name, bad)


def check_reference_yaml(rs: RecordSet, smoke: bool) -> Check:
    """A reference config.yaml (one per seed directory) holds section 1's overrides."""
    name = "reference: config.yaml overrides (section 1)"
    paths = [(s, Path(d) / "config.yaml") for s, d in rs.seed_dirs]
    paths = [(s, p) for s, p in paths if p.is_file()]
    if not paths:
        return Check(name, "skip", "no config.yaml")
    try:
        import yaml
    except ImportError:
        return Check(name, "skip", "pyyaml not installed")
    want = dict(REF_YAML_RUN) if smoke else {**REF_YAML_RUN, **REF_YAML_FULL}
    problems = []
    for s, p in paths:
        try:
            tree = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            problems.append(f"{p}: not YAML ({e})")
            continue
        for key, value in {"seed": s, **want}.items():
            try:
                got = _dotted(tree, key)
            except KeyError:
                problems.append(f"seed {s}: {key} missing")
                continue
            if not _same_value(got, value):
                problems.append(f"seed {s}: {key} = {got!r}, protocol {value!r}")
    return _check(name, problems)


def check_seeds_present(rs: RecordSet, side_role: str, seeds: tuple[int, ...]) -> Check:
    have = {r.get("seed") for r in rs.records}
    missing = [s for s in seeds if s not in have]
    return _check(f"{side_role}: requested seeds present",
                  [f"seed {s} has no records" for s in missing], f"seeds {list(seeds)}")


def plain_records_note(rs: RecordSet, side_role: str) -> list[Check]:
    """A skip entry naming the records read without the protocol's fields (inputs.as_ours);
    none otherwise."""
    if not rs.plain:
        return []
    return [Check(f"{side_role}: protocol fields ({', '.join(PROTOCOL_FIELDS)})", "skip",
                  f"{rs.plain} records without them: read as ours, S2 from episodes.jsonl, "
                  "train metrics under the names logged")]


def side_checks(rs: RecordSet, side_role: str, seeds: tuple[int, ...], sched: Schedule,
                smoke: bool) -> list[Check]:
    """All checks of one side; later checks run only on a schema-valid set."""
    checks = [check_done_markers(rs.path, side_role), check_seeds_present(rs, side_role, seeds),
              *plain_records_note(rs, side_role), check_schema(rs, side_role, sched)]
    if any(c.failed for c in checks):
        return checks
    checks += [
        check_record_counts(rs, side_role, seeds, sched),
        check_updates(rs, side_role, seeds, sched),
        check_eval_consistency(rs, side_role, sched),
        check_episodes(rs, side_role, seeds, sched),
    ]
    if not checks[-1].failed:
        checks += [check_s2_audit(rs, side_role, seeds, sched),
                   check_flush(rs, side_role, sched)]
    if smoke and len(sched.log_points) < 3:
        checks.append(Check(f"{side_role}: smoke needs 3 log points", "fail",
                            f"only {len(sched.log_points)}"))
    return checks

