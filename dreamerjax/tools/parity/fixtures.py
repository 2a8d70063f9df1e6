"""Compare our functions with arrays produced by the reference code (danijar/dreamerv3 @29eb964).

The fixture directory (tests/data/reference, arrays produced by the reference) holds one
.npz per experiment; its README.md says how each array was produced. This module is the
checker framework plus the checks of fixtures (a)-(e): two-hot, symlog/symexp, return
normaliser, lambda returns, optimiser.

Extending it: a check is a function `check(path: Path) -> Iterable[Row]` registered for a
file name with `register(name, check)` (agent-level checks do this at import time from
`dreamerjax.tools.parity.agent_checks`). Every file in the directory is accounted for: checked,
a known companion (README.md, *.yaml, inputs named with `register_companion`), registered
as not yet supported, or reported as unknown.

Tolerances are written next to each comparison in units of float32 machine epsilon
(EPS = 2**-23 ~ 1.19e-7). An element passes when |ours - ref| <= atol + rtol * |ref|;
non-finite elements must be identical (same infinity, both NaN).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

import jax
import jax.numpy as jnp
import numpy as np

EPS = float(np.finfo(np.float32).eps)
F32_MAX = float(np.finfo(np.float32).max)

# Row kinds. Only 'check' and 'error' rows can fail a normal run; 'unsupported' and
# 'unknown' rows fail only a strict run; 'info' and 'absent' rows never fail.
CHECK, INFO, ERROR, UNSUPPORTED, UNKNOWN, ABSENT = (
    "check", "info", "error", "unsupported", "unknown", "absent")


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the parity table."""

    fixture: str
    array: str
    max_abs_err: float | None
    max_rel_err: float | None
    tolerance: str
    passed: bool | None  # None: nothing was asserted (info, unsupported, unknown, absent)
    kind: str = CHECK
    note: str = ""

    def fails(self, strict: bool = False) -> bool:
        if self.kind in (CHECK, ERROR):
            return not self.passed
        if self.kind in (UNSUPPORTED, UNKNOWN):
            return strict
        return False

    @property
    def status(self) -> str:
        if self.kind == CHECK:
            return "PASS" if self.passed else "FAIL"
        return {INFO: "info", ERROR: "ERROR", UNSUPPORTED: "not yet supported",
                UNKNOWN: "unknown file", ABSENT: "absent"}[self.kind]


CheckFn = Callable[[Path], Iterable[Row]]

_CHECKS: dict[str, CheckFn] = {}
_UNSUPPORTED: dict[str, str] = {}
_COMPANIONS: set[str] = {"README.md", "*.yaml"}


def register(name: str, check: CheckFn) -> None:
    """Register `check` for the fixture file `name` (a file name or fnmatch pattern).

    Replaces an earlier registration and the 'not yet supported' marker of that name.
    """
    _CHECKS[name] = check
    _UNSUPPORTED.pop(name, None)


def register_unsupported(name: str, reason: str) -> None:
    """Mark a known fixture that has no check yet (fails only strict runs)."""
    if name not in _CHECKS:
        _UNSUPPORTED[name] = reason


def register_companion(name: str) -> None:
    """Mark a file (or pattern) as a known input that is read by other checks."""
    _COMPANIONS.add(name)
    _UNSUPPORTED.pop(name, None)


def _lookup(table: dict | set, filename: str):
    if filename in table:
        return filename
    for pattern in sorted(table):
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(filename, pattern):
            return pattern
    return None


# --------------------------------------------------------------------------- comparison


def compare(
    fixture: str,
    array: str,
    ours,
    ref,
    *,
    atol=0.0,
    rtol: float = 0.0,
    tol: str,
    note: str = "",
) -> Row:
    """Element-wise |ours - ref| <= atol + rtol * |ref| (atol may be an array).

    Both are compared in float64. max_rel_err is over elements with ref != 0.
    """
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        return Row(fixture, array, None, None, tol, False,
                   note=f"shape {ours.shape} != reference {ref.shape}")
    finite = np.isfinite(ref) & np.isfinite(ours)
    same_nonfinite = np.array_equal(ours[~finite], ref[~finite], equal_nan=True)
    diff = np.abs(ours[finite] - ref[finite])
    scale = np.abs(ref)[finite]
    bound = np.broadcast_to(np.asarray(atol, np.float64), ref.shape)[finite] + rtol * scale
    ok = bool(np.all(diff <= bound)) and same_nonfinite
    max_abs = float(diff.max()) if diff.size else 0.0
    nz = scale > 0
    max_rel = float((diff[nz] / scale[nz]).max()) if nz.any() else 0.0
    if not same_nonfinite:
        note = (note + "; " if note else "") + "non-finite entries differ"
    return Row(fixture, array, max_abs, max_rel, tol, ok, note=note)


def info(fixture: str, array: str, ours, ref, note: str) -> Row:
    """An error figure printed for information only."""
    row = compare(fixture, array, ours, ref, atol=np.inf, tol="-")
    return as_info(row, note)


def as_info(row: Row, note: str) -> Row:
    """A compared row reported for information only: its errors and tolerance printed,
    never failing."""
    return dataclasses.replace(row, passed=None, kind=INFO, note=note)


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


# --------------------------------------------------------------------------- (a) two-hot


def check_twohot(path: Path) -> Iterable[Row]:
    from dreamerjax.algo import numerics as nm

    fx = path.name
    d = _load(path)
    bins = nm.twohot_bins(d["bins_eager"].shape[0])
    bins_np = np.asarray(bins)
    yield Row(fx, "bins_eager (bitwise)", float(np.abs(bins_np - d["bins_eager"]).max()), None,
              "identical float32 bits",
              bool(np.array_equal(bins_np.view(np.int32), d["bins_eager"].view(np.int32))),
              note="bins_jit is identical to bins_eager")
    yield Row(fx, "bins antisymmetry", float(np.abs(bins_np + bins_np[::-1]).max()), None,
              "bins == -bins[::-1] exactly", bool(np.array_equal(bins_np, -bins_np[::-1])))

    logits = jnp.asarray(d["logits"])
    probs = jax.jit(lambda x: jax.nn.softmax(x, -1))(logits)
    yield compare(fx, "probs_jit", probs, d["probs_jit"], atol=1e-30, rtol=16 * EPS,
                  tol="rtol 16 eps (XLA exp differs by ulps across versions)")

    # The float32 rounding of a sum of products is bounded by eps * sum_j |p_j b_j|, which
    # reaches ~2e6 for uniform probabilities although the mean itself is 0.
    p64 = np.exp(d["logits"].astype(np.float64) - d["logits"].max(-1, keepdims=True))
    p64 /= p64.sum(-1, keepdims=True)
    mass = (p64 * np.abs(d["bins_eager"].astype(np.float64))).sum(-1)
    mean = np.asarray(jax.jit(nm.twohot_mean)(logits, bins))
    yield compare(fx, "mean vs mean_f64", mean, d["mean_f64"], atol=4 * EPS * mass,
                  tol="4 eps * sum|p*b| per row")
    yield info(fx, "(ref) mean_jit vs mean_f64", d["mean_jit"], d["mean_f64"],
               note="the reference's own jitted error, for comparison (D1)")
    kinds = [str(k) for k in d["kinds"]]
    mirror = np.array([k == "zeros" or k.startswith(("mirror_full", "middle_bump_c127"))
                       for k in kinds])
    yield Row(fx, f"mean == 0 on {int(mirror.sum())} mirror rows",
              float(np.abs(mean[mirror]).max()), None, "exactly 0.0",
              bool(np.all(mean[mirror] == 0.0)))

    mode = jax.jit(nm.twohot_mode)(logits, bins)
    yield compare(fx, "mode_jit", mode, d["mode_jit"], atol=4 * EPS * mass,
                  tol="4 eps * sum|p*b| per row")

    targets = jnp.asarray(d["targets"])
    n, k = d["logits"].shape

    @jax.jit
    def log_prob(lg, tg, b):
        lg = jnp.broadcast_to(lg[:, None, :], (n, tg.shape[0], k))
        return nm.twohot_log_prob(lg, jnp.broadcast_to(tg, (n, tg.shape[0])), b)

    yield compare(fx, "log_prob_jit", log_prob(logits, targets, bins), d["log_prob_jit"],
                  atol=1e-6, rtol=4 * EPS, tol="rtol 4 eps + atol 1e-6")


# --------------------------------------------------------------------------- (b) symlog


def check_symlog(path: Path) -> Iterable[Row]:
    from dreamerjax.algo import numerics as nm

    fx = path.name
    d = _load(path)
    x = jnp.asarray(d["x"])
    for name, fn in (("symlog", nm.symlog), ("symexp", nm.symexp)):
        ours = np.asarray(jax.jit(fn)(x))
        yield compare(fx, f"{name}_jit", ours, d[f"{name}_jit"], rtol=2 * EPS,
                      tol="rtol 2 eps")
        exact = d[f"{name}_f64"]
        # Where float64 is finite but beyond the float32 range, float32 must give +-inf.
        with np.errstate(invalid="ignore"):
            exact = np.where(np.abs(exact) > F32_MAX, np.sign(exact) * np.inf, exact)
        # XLA's float32 log1p / expm1 are within a few ulps, not correctly rounded.
        yield compare(fx, f"{name}_f64", ours, exact, atol=1e-45, rtol=4 * EPS,
                      tol="rtol 4 eps; overflow -> inf")


# --------------------------------------------------------------------------- (c) retnorm


def check_retnorm(path: Path) -> Iterable[Row]:
    from dreamerjax.algo import normalize
    from dreamerjax.config.defaults import RetNormConfig

    fx = path.name
    d = _load(path)
    cfg = RetNormConfig(rate=float(np.round(d["rate"], 6)), limit=float(d["limit"]),
                        perclo=float(d["perclo"]), perchi=float(d["perchi"]))

    @jax.jit
    def run(batches):
        def step(state, batch):
            state = normalize.retnorm_update(state, batch, cfg)
            offset, scale = normalize.retnorm_stats(state, cfg)
            return state, (state.low, state.high, offset, scale)

        return jax.lax.scan(step, normalize.retnorm_init(), batches)[1]

    batches = jnp.asarray(d["batches"])
    outs = dict(zip(("lo", "hi", "offset", "scale"), run(batches), strict=True))
    for name, ours in outs.items():
        ref = d[name]
        yield compare(fx, name, ours, ref, atol=4 * EPS * np.abs(ref).max(), rtol=4 * EPS,
                      tol="rtol 4 eps + 4 eps * max|ref|")
    perc = jax.jit(jax.vmap(lambda b: jnp.percentile(b, jnp.array([cfg.perclo, cfg.perchi]))))
    p = np.asarray(perc(batches))
    for i, name in enumerate(("batch_p5", "batch_p95")):
        yield compare(fx, name, p[:, i], d[name], rtol=4 * EPS, tol="rtol 4 eps")


# --------------------------------------------------------------------------- (d) returns


def check_returns(path: Path) -> Iterable[Row]:
    from dreamerjax.algo import returns

    fx = path.name
    d = _load(path)
    # The reference passes lambda as a Python float (configs.yaml: 0.95); keep 1 - lam in
    # double precision like it does.
    lam = float(np.round(float(d["lam"]), 6))
    horizon = int(d["horizon"])
    for contdisc in (True, False):
        tag = "contdisc" if contdisc else "nocontdisc"
        fn = jax.jit(lambda r, c, v, cd=contdisc: returns.imagined_returns(
            r, c, v, lam, cd, horizon))
        ret, weight = fn(d["rew"], d["con"], d["tarval"])
        steps = ret.shape[1] + 1
        for ref_name in (f"ret_{tag}_jit", f"ret_{tag}_f64"):
            ref = d[ref_name]
            yield compare(fx, ref_name, ret, ref, atol=steps * EPS * np.abs(ref).max(),
                          rtol=4 * EPS, tol=f"{steps} eps * max|ret| ({steps - 1}-step recursion)")
        ref = d[f"weight_{tag}_jit"]
        yield compare(fx, f"weight_{tag}_jit", weight, ref, atol=steps * EPS * np.abs(ref).max(),
                      tol=f"{steps} eps * max|w| (cumprod)")
    replay = jax.jit(lambda *a: returns.replay_return(*a, lam, horizon))(
        d["replay_reward"], d["replay_boot"], d["replay_is_terminal"], d["replay_is_last"])
    ref = d["replay_ret_jit"]
    steps = ref.shape[1] + 1
    yield compare(fx, "replay_ret_jit", replay, ref, atol=steps * EPS * np.abs(ref).max(),
                  rtol=4 * EPS, tol=f"{steps} eps * max|ret| ({steps - 1}-step recursion)")


# --------------------------------------------------------------------------- (e) optimiser


def check_optimizer(path: Path) -> Iterable[Row]:
    import optax

    from dreamerjax.algo import optim
    from dreamerjax.config.defaults import OptConfig

    fx = path.name
    d = _load(path)
    names = sorted(k[len("init_"):] for k in d if k.startswith("init_"))
    steps = d[f"grads_{names[0]}"].shape[0]
    # README (e): Optimizer(4e-5, rms, eps 1e-20, momentum, agc 0.3, pmin 1e-3,
    # beta1 0.9, beta2 0.999) with warmup W.
    for tag, warmup in (("default", 1000), ("warmup0", 0)):
        cfg = OptConfig(lr=4e-5, eps=1e-20, beta1=0.9, beta2=0.999, agc=0.3, pmin=1e-3,
                        warmup=warmup)
        opt = optim.make_optimizer(cfg)

        @jax.jit
        def step(params, state, grads, opt=opt):
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
            metrics = optim.optimizer_metrics(grads, updates, params, optim.opt_step(state))
            return params, state, metrics

        params = {k: jnp.asarray(d[f"init_{k}"]) for k in names}
        state = opt.init(params)
        history, metrics = [], []
        for s in range(steps):
            grads = {k: jnp.asarray(d[f"grads_{k}"][s]) for k in names}
            params, state, m = step(params, state, grads)
            history.append(params)
            metrics.append(m)
        for k in names:
            ours = np.stack([np.asarray(h[k]) for h in history])
            ref = d[f"{tag}_params_{k}"]
            yield compare(fx, f"{tag}_params_{k} (steps 1-{steps})", ours, ref,
                          atol=4 * EPS * np.abs(ref).max(), rtol=4 * EPS,
                          tol="rtol 4 eps + 4 eps * max|param|")
        for key in ("grad_norm", "update_norm", "param_norm"):
            ours = np.array([float(m[f"opt_{key}"]) for m in metrics])
            yield compare(fx, f"{tag}_{key}", ours, d[f"{tag}_{key}"], rtol=4 * EPS,
                          tol="rtol 4 eps")
        ours = np.array([int(m["opt_grad_steps"]) for m in metrics])
        yield compare(fx, f"{tag}_grad_steps", ours, d[f"{tag}_grad_steps"], tol="exact")


register("twohot.npz", check_twohot)
register("symlog_symexp.npz", check_symlog)
register("retnorm.npz", check_retnorm)
register("lambda_returns.npz", check_returns)
register("optimizer.npz", check_optimizer)


# --------------------------------------------------------------------------- runner


def _run_one(path: Path, check: CheckFn) -> list[Row]:
    rows: list[Row] = []
    try:
        rows.extend(check(path))
    except Exception as exc:  # a broken check is a failure, not a crash of the table
        last = traceback.extract_tb(exc.__traceback__)[-1]
        rows.append(Row(path.name, "<check raised>", None, None, "-", False, kind=ERROR,
                        note=f"{type(exc).__name__}: {exc} ({Path(last.filename).name}:"
                             f"{last.lineno})"))
    return rows


def check_file(path: str | Path) -> tuple[list[Row], str | None]:
    """(rows, pattern) of one fixture file: its registered check's rows, an `unsupported`
    or `unknown` row, or no row for a companion (an input read by another file's check);
    pattern is the registered name that took the file (None: a companion or unknown)."""
    path = Path(path)
    name = path.name
    if (key := _lookup(_CHECKS, name)) is not None:
        return _run_one(path, _CHECKS[key]), key
    if _lookup(_COMPANIONS, name) is not None:
        return [], None
    if (key := _lookup(_UNSUPPORTED, name)) is not None:
        return [Row(name, "-", None, None, "-", None, kind=UNSUPPORTED,
                    note=_UNSUPPORTED[key])], key
    return [Row(name, "-", None, None, "-", None, kind=UNKNOWN,
                note="no check is registered for this file")], None


def run_parity(
    directory: str | Path,
    strict: bool = False,
    *,
    print_table: bool = True,
    out: TextIO | None = None,
) -> tuple[list[Row], int]:
    """Run every registered check on the files of `directory`.

    Returns (rows, exit_code): exit code 1 when a check fails or raises, and with
    strict=True also when a file is unknown or has no check yet; 0 otherwise. The table is
    printed to `out` (default sys.stdout) unless print_table is False.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"fixture directory not found: {directory}")
    rows: list[Row] = []
    seen_keys: set[str] = set()
    files = sorted(p for p in directory.iterdir() if p.is_file())
    for i, path in enumerate(files, 1):
        if print_table:  # progress where the table goes to: a file can take minutes
            print(f"parity: {path.name} ({i}/{len(files)})", file=sys.stderr, flush=True)
        file_rows, key = check_file(path)
        rows.extend(file_rows)
        if key is not None:
            seen_keys.add(key)
    for key in sorted(set(_CHECKS) - seen_keys):
        rows.append(Row(key, "-", None, None, "-", None, kind=ABSENT,
                        note="registered check, file not in this directory"))
    code = 1 if any(r.fails(strict) for r in rows) else 0
    if print_table:
        (out or sys.stdout).write(format_table(rows, strict) + "\n")
    return rows, code


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def format_table(rows: list[Row], strict: bool = False) -> str:
    header = ("fixture", "array", "max_abs_err", "max_rel_err", "tolerance", "result")
    body = [(r.fixture, r.array, _fmt(r.max_abs_err), _fmt(r.max_rel_err), r.tolerance,
             r.status + (f"  ({r.note})" if r.note else "")) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(header[:-1])]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header[:-1], widths, strict=True))
             + "  " + header[-1]]
    lines.append("-" * len(lines[0]))
    for b in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(b[:-1], widths, strict=True))
                     + "  " + b[-1])
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    failed = sum(r.fails(strict) for r in rows)
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    mode = "strict" if strict else "default (unsupported/unknown files do not fail)"
    lines.append("")
    lines.append(f"{summary}. Mode: {mode}. {'FAILED' if failed else 'OK'}"
                 f" ({failed} failing row{'s' if failed != 1 else ''}).")
    return "\n".join(lines)
