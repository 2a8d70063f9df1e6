"""Whole-run side by side: each program's own training loop on the CartPole protocol's
configuration (docs/protocol.md: 1m, 16 envs, train ratio 512, evaluation every 2,000 rows
with 10 episodes) for the first --rows rows (default 4,000, evaluation included), timed as a
user feels it: from starting the process to its exit. Standard library only.

    python benchmarks/side_by_side/whole_run.py --reference CHECKOUT [--rows 4000]

One run alternates the programs, first with 1 seed each, then with --seeds (3):

- reference: benchmarks/reference_run/run_reference.py (the reference's own loop) on the
  CartPole port, one process per seed; with 3 seeds, 3 processes at once, as a user runs
  the reference's seeds;
- Ajax: its `DreamerV3.train` (driver_ajax_train.py), the seeds as one list (vmapped);
- dreamerjax: `dreamerjax train` (the command line, a fresh process), the seeds batched in
  one run, with an empty compilation cache of its own so the compile is counted.

Per program: wall seconds, rows/s and updates/s (over all seeds), the peak RSS of its
process tree (for the reference's 3 processes, of all three together), and its seconds per
seed over dreamerjax's within the same phase. The JSON goes to
--out/whole_run_YYYYMMDD.json; `table.py --whole-run` prints it. Every run directory is
under --work (outside the repository).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as sbs  # noqa: E402  (the per-update bench: checks, venvs, machine)

REPO = sbs.REPO
HARNESS = os.path.join(REPO, "benchmarks", "reference_run", "run_reference.py")
PROGRAMS = ("reference", "ajax", "dreamerjax")
ENVS, TRAIN_RATIO, SIZE = 16, 512.0, "1m"
BATCH_ROWS = 65  # 64 trained + 1 context: a replay needs this many rows per env


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", help="a checkout of danijar/dreamerv3 at 29eb964 "
                   "(required with the reference among --programs)")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/dreamerjax/side_by_side"))
    p.add_argument("--out", default=os.path.join(REPO, "results", "bench"))
    p.add_argument("--rows", type=int, default=4000, help="rows per seed (the budget)")
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--seeds", type=int, default=3, help="seeds of the second phase")
    p.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    p.add_argument("--tiny", action="store_true",
                   help="smoke only: small networks (the reference's and Ajax's the "
                        "reference debug config's widths, dreamerjax's train --tiny)")
    p.add_argument("--python-reference")
    p.add_argument("--python-ajax")
    p.add_argument("--dreamerjax-python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--ajax-jax", default="same")
    args = p.parse_args(argv)
    for flag in ("rows", "eval_every", "eval_episodes", "seeds"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag.replace('_', '-')} must be >= 1")
    if args.eval_every % ENVS or args.rows % args.eval_every:
        raise SystemExit(f"--eval-every {args.eval_every} must be a multiple of {ENVS} (the "
                         f"envs) and divide --rows {args.rows}")
    if args.rows < ENVS * BATCH_ROWS:
        raise SystemExit(f"--rows {args.rows}: at least {ENVS * BATCH_ROWS} ({BATCH_ROWS} "
                         f"rows per env, one training window; dreamerjax refuses less)")
    if "reference" in args.programs and not args.reference:
        raise SystemExit("--reference: required to run the reference (or leave it out of "
                         "--programs)")
    args.work = os.path.abspath(args.work)
    if os.path.commonpath([args.work, REPO]) == REPO:
        raise SystemExit(f"--work: {args.work} is inside the repository")
    if args.reference:
        args.reference = os.path.abspath(args.reference)
    return args


# ----------------------------------------------------------------------------- measuring


def status_kib(pid: int, key: str) -> int:
    """One field of /proc/PID/status in KiB (VmRSS, VmHWM); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree_rss_mib(pids: list[int]) -> float:
    """Resident MiB of `pids` and all their descendants now (VmRSS from /proc)."""
    seen, todo, kib = set(), list(pids), 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        kib += status_kib(pid, "VmRSS")
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return kib / 1024


def run_processes(cmds: list[tuple[list[str], dict, str]], cwd: str) -> dict:
    """Start every (argv, env, log path) at once and wait for all: wall seconds from the
    first start to the last exit; the peak of the summed RSS of all their process trees
    (sampled every 0.1 s); each started process's own peak (VmHWM, its last sample; not
    wait4's ru_maxrss, which on Linux starts from the forking parent's size; None for a
    process that ended before any sample reached it); exit codes;
    stdout (to a file beside the log, read after the exit, so no pipe can stall a
    program)."""
    stop = threading.Event()
    peak, t0 = [0.0], time.perf_counter()
    procs, files = [], []
    for argv, env, log in cmds:
        files += [open(log, "w"), open(log + ".stdout", "w")]
        procs.append(subprocess.Popen(argv, env=env, cwd=cwd, stdout=files[-1],
                                      stderr=files[-2]))
    hwm = [0] * len(procs)

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], tree_rss_mib([p.pid for p in procs]))
            for i, p in enumerate(procs):
                hwm[i] = max(hwm[i], status_kib(p.pid, "VmHWM"))
            stop.wait(0.1)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    stop.set()
    thread.join()
    for f in files:
        f.close()
    outs = []
    for _, _, log in cmds:
        with open(log + ".stdout") as f:
            outs.append(f.read())
    return {"wall_s": wall, "peak_rss_tree_mib": peak[0],
            "maxrss_mib": [k / 1024 if k else None for k in hwm], "returncodes": codes,
            "stdout": outs,
            "logs": [c[2] for c in cmds]}


def read_records(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def last_updates(records: list[dict]) -> dict[int, dict]:
    """Per seed, its last record's rows and updates (a records.jsonl of either side)."""
    out = {}
    for r in records:
        out[int(r["seed"])] = {"rows": int(r["rows"]), "updates": int(r["updates"])}
    return out


def summarise(run: dict, seeds: int, rows_updates: dict[int, dict] | None) -> dict:
    """Wall, rows/s and updates/s over all seeds, seconds per seed."""
    out = {"seeds": seeds, "wall_s": run["wall_s"], "seconds_per_seed": run["wall_s"] / seeds,
           "peak_rss_mib": run["peak_rss_tree_mib"], "maxrss_mib": run["maxrss_mib"],
           "returncodes": run["returncodes"], "logs": run["logs"]}
    if rows_updates:
        rows = sum(v["rows"] for v in rows_updates.values())
        updates = sum(v["updates"] for v in rows_updates.values())
        out.update(per_seed=rows_updates, rows=rows, updates=updates,
                   rows_per_s=rows / run["wall_s"], updates_per_s=updates / run["wall_s"])
    return out


def add_ratios(phase: dict) -> None:
    """Each program's seconds per seed over dreamerjax's in the same phase (in place)."""
    ours = phase.get("dreamerjax", {})
    ours = None if "error" in ours else ours.get("seconds_per_seed")  # a failed run: none
    for rec in phase.values():
        if ours and "seconds_per_seed" in rec and "error" not in rec:
            rec["per_seed_over_dreamerjax"] = rec["seconds_per_seed"] / ours


# ----------------------------------------------------------------------------- programs


def reference_cmds(args, py: str, base: dict, rundir: str, seeds: int) -> list:
    """One run_reference.py process per seed (each its own run directory)."""
    env = {**base, "PYTHONPATH": args.reference}
    cmds = []
    for s in range(seeds):
        argv = [py, HARNESS, "--checkout", args.reference, "--env", "cartpole",
                "--seed", str(s), "--rows", str(args.rows), "--eval-every",
                str(args.eval_every), "--eval-episodes", str(args.eval_episodes),
                "--num-envs", str(ENVS), "--out", os.path.join(rundir, f"seed{s}")]
        cmds.append((argv + (["--tiny"] if args.tiny else []), env,
                     os.path.join(rundir, f"seed{s}.log")))
    return cmds


def dreamerjax_cmds(args, py: str, base: dict, rundir: str, seeds: int) -> list:
    """`dreamerjax train` as a user starts it; XDG_CACHE_HOME points at an empty folder, so
    its persistent compilation cache (~/.cache/dreamerjax/jax) starts empty: the
    precompile child compiles, the training process reads what it wrote, as on a first run."""
    cache = os.path.join(rundir, "xdg_cache")
    os.makedirs(cache)
    env = {**base, "PYTHONPATH": REPO, "XDG_CACHE_HOME": cache}
    argv = [py, "-m", "dreamerjax.tools.cli", "train", "--env", "CartPole-v1", "--size", SIZE,
            "--seeds", *[str(s) for s in range(seeds)], "--steps", str(args.rows),
            "--eval-every", str(args.eval_every), "--eval-episodes", str(args.eval_episodes),
            "--num-envs", str(ENVS), "--train-ratio", str(TRAIN_RATIO),
            "--out", os.path.join(rundir, "run")]
    if args.tiny:
        argv += ["--tiny"]  # replaces the --size widths (a named config would not)
    return [(argv, env, os.path.join(rundir, "train.log"))]


def ajax_cmds(args, py: str, base: dict, rundir: str, seeds: int) -> list:
    env = {**base, "AJAX_NO_COMPILE_CACHE": "1", "WANDB_MODE": "disabled"}
    argv = [py, os.path.join(HERE, "driver_ajax_train.py"), "--rows", str(args.rows),
            "--seeds", str(seeds), "--eval-every", str(args.eval_every),
            "--eval-episodes", str(args.eval_episodes)] + (["--tiny"] if args.tiny else [])
    return [(argv, env, os.path.join(rundir, "train.log"))]


def counts(name: str, rundir: str, run: dict, seeds: int) -> dict | None:
    """Per seed, the rows and updates the program says it did (None if it did not say)."""
    if name == "reference":
        recs = []
        for s in range(seeds):
            path = os.path.join(rundir, f"seed{s}", "records.jsonl")
            recs += read_records(path) if os.path.exists(path) else []
        return last_updates(recs) or None
    if name == "dreamerjax":
        path = os.path.join(rundir, "run", "records.jsonl")
        return last_updates(read_records(path)) if os.path.exists(path) else None
    lines = [ln for ln in run["stdout"][0].splitlines() if ln.startswith("{")]
    if not lines:
        return None
    out = json.loads(lines[-1])
    ups = out.get("updates_per_seed")
    if not ups or len(ups) != len(out["seeds"]):
        return None
    return {s: {"rows": out["rows_per_seed"], "updates": u}
            for s, u in zip(out["seeds"], ups, strict=True)}


CMDS = {"reference": reference_cmds, "ajax": ajax_cmds, "dreamerjax": dreamerjax_cmds}


def run_program(name: str, args, py: str, base: dict, root: str, seeds: int, log) -> dict:
    rundir = os.path.join(root, f"{name}_{seeds}seed")
    os.makedirs(rundir)
    cmds = CMDS[name](args, py, base, rundir, seeds)
    load = sbs.load()
    log(f"{name}, {seeds} seed(s): {len(cmds)} process(es)")
    run = run_processes(cmds, rundir)
    rec = summarise(run, seeds, counts(name, rundir, run, seeds))
    rec["load_before"], rec["load_after"] = load, sbs.load()
    rec["argv"] = [c[0] for c in cmds]
    if any(run["returncodes"]):
        rec["error"] = f"exit codes {run['returncodes']}; logs {run['logs']}"
        log(f"{name}: FAILED ({rec['error']})")
    else:
        log(f"{name}, {seeds} seed(s): {rec['wall_s']:.1f} s, "
            f"{rec.get('updates', '?')} updates, peak RSS {rec['peak_rss_mib']:.0f} MiB")
    return rec


# ----------------------------------------------------------------------------- run


def pythons(args, log) -> tuple[dict, dict]:
    """The interpreter of each program, and {program: reason} for those skipped."""
    out, skipped = {"dreamerjax": args.dreamerjax_python}, {}
    if "reference" in args.programs:
        sbs.check_reference(args.reference)
        py = sbs.find_python(args.python_reference, [(3, 11), (3, 12), (3, 10)],
                             "--python-reference")
        out["reference"] = sbs.ensure_venv(os.path.join(args.work, "venv_reference"), py,
                                           sbs.REFERENCE_REQUIREMENTS, log)
    if "ajax" in args.programs:
        try:
            py = sbs.find_python(args.python_ajax, [(3, 12), (3, 13)], "--python-ajax")
            pin = {"same": sbs.jax_version(args.dreamerjax_python), "any": None}.get(
                args.ajax_jax, args.ajax_jax)
            reqs = [f"ajax-rl=={sbs.AJAX_VERSION}"] + (
                [f"jax=={pin}", f"jaxlib=={pin}"] if pin else [])
            out["ajax"] = sbs.ensure_venv(os.path.join(args.work, "venv_ajax"), py, reqs, log)
        except (SystemExit, subprocess.CalledProcessError) as e:
            skipped["ajax"] = f"no Ajax environment: {e}"
            log(f"skipping Ajax: {skipped['ajax']}")
    return out, skipped


def main(argv=None) -> int:
    args = parse(argv)
    log = lambda msg: print(f"[whole_run {time.strftime('%H:%M:%S')}] {msg}",  # noqa: E731
                            file=sys.stderr, flush=True)
    os.makedirs(args.work, exist_ok=True)
    pys, skipped = pythons(args, log)
    order = [p for p in PROGRAMS if p in args.programs and p not in skipped]
    stamp = datetime.datetime.now(datetime.UTC)
    root = os.path.join(args.work, "whole_run", stamp.strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(root)
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_PLATFORMS")}
    base.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    result = {
        "kind": "whole_run", "date": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": sbs.machine(), "nice": os.nice(0), "dreamerjax_git": sbs.git_state(),
        "config": {"env": "CartPole-v1", "size": SIZE, "num_envs": ENVS,
                   "train_ratio": TRAIN_RATIO, "rows_per_seed": args.rows,
                   "eval_every": args.eval_every, "eval_episodes": args.eval_episodes,
                   "tiny": args.tiny, "order": order, "seeds": [1, args.seeds]},
        "skipped": skipped, "reference_commit": sbs.REFERENCE_COMMIT if args.reference else None,
        "versions": {k: sbs.pip_freeze(v) for k, v in pys.items()},
        "loadavg_before": sbs.load(), "phases": {}, "work": root,
        "command": "python benchmarks/side_by_side/whole_run.py " + " ".join(
            a if a != args.reference else "CHECKOUT" for a in (argv or sys.argv[1:])),
    }
    for seeds in sorted({1, args.seeds}):
        phase = result["phases"][str(seeds)] = {}
        for name in order:
            phase[name] = run_program(name, args, pys[name], base, root, seeds, log)
        add_ratios(phase)
    result["loadavg_after"] = sbs.load()
    path = write(result, args.out, stamp)
    log(f"written {path}")
    import table
    print(table.whole_run_markdown(result))
    return 0


def write(result: dict, out: str, stamp) -> str:
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"whole_run_{stamp.strftime('%Y%m%d')}.json")
    if os.path.exists(path):  # a second run that day keeps the first (sorts after it)
        path = path[:-len(".json")] + f"_{stamp.strftime('%H%M%S')}.json"
    with open(path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


if __name__ == "__main__":
    sys.exit(main())
