"""The CartPole comparison harness: `dreamerjax compare RUN_DIR [--reference DIR]`.

Reads our run's record set and, when given, a reference record set, checks both against
the pre-registered protocol, written to compare Ajax (ajax-rl, an independent JAX
DreamerV3) with the reference ("Ajax DreamerV3 vs reference DreamerV3 (29eb964) on
CartPole-v1: comparison protocol", sections 5.1-5.4; docs/protocol.md), computes its
statistics and writes compare.md, summary.json and compare.png. Our run directory also
holds config.json (the resolved `dreamerjax.config.defaults.Config`), which fixes the log
points and, through dreamerjax.data.schedule, the expected update counts of both sides.
Our records carry none of the protocol's own fields: they are read as our side's, and S2
comes from the run's episodes.jsonl (inputs.as_ours, statistics.s2_at).

The package, by job:
  inputs.py      the run's schedule and the record sets (layouts, our records as ours)
  checks.py      the input checks of section 5.3
  statistics.py  S1, S2, the decision rule (section 5.2) and the metric windows (5.4)
  report.py      compare.md, summary.json, compare.png and the printed result

The decision stays with the user: the exit code says only whether the inputs passed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dreamerjax.tools.protocol.checks import (
    Check,
    check_protocol_config,
    check_reference_yaml,
    side_checks,
)
from dreamerjax.tools.protocol.inputs import (
    InputError,
    RecordSet,
    Schedule,
    as_ours,
    is_int,
    load_record_set,
    schedule_from_config,
)
from dreamerjax.tools.protocol.report import (
    PLOT,
    Side,
    build_side,
    plot_curves,
    print_result,
    summary_dict,
    write_failure_report,
    write_report,
)
from dreamerjax.tools.protocol.statistics import REFERENCE_RANGE_SOURCE, decide, s1_rows

__all__ = ["compare_main"]


def _seeds_of(rs: RecordSet, seeds: tuple[int, ...] | None) -> tuple[int, ...]:
    if seeds is not None:
        return tuple(seeds)
    return tuple(sorted({r["seed"] for r in rs.records if is_int(r.get("seed"))}))


def _read_inputs(run_dir: str, reference: str | None
                 ) -> tuple[dict, Schedule, RecordSet, RecordSet | None]:
    """(config.json, its schedule, our record set, the reference's or None); InputError,
    JSONDecodeError or TypeError when an input cannot be read."""
    cfg_path = Path(run_dir) / "config.json"
    if not cfg_path.is_file():
        raise InputError(f"{cfg_path}: missing")
    cfg = json.loads(cfg_path.read_text())
    sched = schedule_from_config(cfg)
    ours_rs = as_ours(load_record_set(run_dir))
    ref_rs = load_record_set(reference) if reference is not None else None
    return cfg, sched, ours_rs, ref_rs


def _all_checks(cfg: dict, sched: Schedule, ours_rs: RecordSet, ref_rs: RecordSet | None,
                seeds: tuple[int, ...] | None, smoke: bool
                ) -> tuple[list[Check], tuple[int, ...], tuple[int, ...]]:
    """(every input check, our seeds, the reference's seeds)."""
    ours_seeds = _seeds_of(ours_rs, seeds)
    checks = [] if smoke else [check_protocol_config(cfg)]
    checks += side_checks(ours_rs, "ours", ours_seeds, sched, smoke)
    ref_seeds: tuple[int, ...] = ()
    if ref_rs is not None:
        ref_seeds = _seeds_of(ref_rs, seeds)
        checks += side_checks(ref_rs, "reference", ref_seeds, sched, smoke)
        if ref_rs.layout == "per_seed":
            checks.append(check_reference_yaml(ref_rs, smoke))
    if not ours_seeds or (ref_rs is not None and not ref_seeds):
        checks.append(Check("seeds to compare", "fail", "a side has no seeds"))
    return checks, ours_seeds, ref_seeds


def _write_summary(out_dir: Path, summary: dict) -> None:
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))


def _reference_side(ref_rs: RecordSet, seeds: tuple[int, ...], sched: Schedule,
                    smoke: bool) -> Side:
    label = ("reference" if ref_rs.side in ("ref", "reference")
             else f"reference ({ref_rs.side})")
    return build_side(label, ref_rs, seeds, sched, smoke)


def compare_main(run_dir: str, reference: str | None = None, out: str | None = None,
                 seeds: tuple[int, ...] | None = None, smoke: bool = False) -> int:
    """Check both record sets, then write compare.md, summary.json and compare.png into
    `out` (default: the run directory; the run's own curves.png is never touched).

    Returns 0 when every input check passed (whatever LEARNS says), 1 when a check failed
    (the report then lists the checks only), 2 when an input cannot be read at all.
    """
    out_dir = Path(out if out is not None else run_dir)
    source = REFERENCE_RANGE_SOURCE if reference is None else f"record set {reference}"
    try:
        cfg, sched, ours_rs, ref_rs = _read_inputs(run_dir, reference)
    except (InputError, json.JSONDecodeError, TypeError) as e:
        print(f"compare: cannot read the inputs: {e}", file=sys.stderr)
        return 2
    checks, ours_seeds, ref_seeds = _all_checks(cfg, sched, ours_rs, ref_rs, seeds, smoke)

    out_dir.mkdir(parents=True, exist_ok=True)
    failed = [c for c in checks if c.failed]
    if failed:
        for c in failed:
            print(f"compare: check failed: {c.name}: {c.detail}", file=sys.stderr)
        write_failure_report(out_dir, run_dir, checks)
        _write_summary(out_dir, summary_dict(None, None, None, source, checks, smoke))
        print(f"compare: wrote the failed checks to {out_dir / 'compare.md'} and "
              f"{out_dir / 'summary.json'}", file=sys.stderr)
        return 1

    ours = build_side("dreamerjax", ours_rs, ours_seeds, sched, smoke)
    ref = None if ref_rs is None else _reference_side(ref_rs, ref_seeds, sched, smoke)
    dec = decide(ours.s1, ref.s1 if ref else None)
    # compare.png, not curves.png: the run's own plot of that name stays as training drew it
    plot_curves(out_dir / PLOT, ours, ref, (dec.lo, dec.hi), s1_rows(sched, smoke))
    write_report(out_dir, ours, ref, dec, source, checks, smoke, sched,
                 (cfg.get("agent") or {}).get("twohot_mean", "exact"))
    _write_summary(out_dir, summary_dict(ours, ref, dec, source, checks, smoke))
    print_result(ours, ref, dec, source)
    print(f"compare: wrote {out_dir / 'compare.md'}, {out_dir / 'summary.json'} and "
          f"{out_dir / PLOT}")
    return 0
