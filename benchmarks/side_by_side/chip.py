"""Same-chip side by side: the unmodified reference at e3f0224 and dreamerjax
`--reference e3f0224`, each a fresh process on one accelerator, one after the other, at
1m float32, 12m float32 and 12m bfloat16. Standard library only.

    python benchmarks/side_by_side/chip.py --reference CHECKOUT [--settings 1m-f32 ...]

Run it with a Python that imports both programs (dreamerjax and its dependencies; the
reference's elements, ninjax, portal, chex, optax, einops, ruamel.yaml; README.md says
how on a TPU VM). Per setting, both programs train the CartPole protocol's configuration
(docs/protocol.md: 16 envs, train ratio 512, batch 16 x 64 + 1 context, evaluation every
--eval-every rows with 10 episodes), 1 seed, for --rows rows:

- the reference: benchmarks/reference_run/run_reference.py --version e3f0224 (its own
  loop on the numpy CartPole port), `jax.platform` the accelerator's, no harness
  checkpoint (`--no-checkpoint`: the stock run saves none in so short a run);
- dreamerjax: `dreamerjax train`, with an empty compilation cache of its own (a user's
  first run).

Figures per setting (the JSON's `rows`): each program's milliseconds per update over its
last record interval (its training loop's seconds between the last two record points,
acting included, evaluation excluded, over the updates in between: the reference's
profiler traces updates 100-120, before that interval), each whole run from process start
to exit, and dreamerjax's per-seed milliseconds with --vmap-seeds seeds (`dreamerjax bench
--sweep`: one program of that many vmapped seeds; sample and update, no acting). The order
alternates by setting (reference first, then dreamerjax first, ...). The JSON is
rewritten after every program, and `--continue FILE` skips what FILE already holds, so a
run split over several commands (each under a job's time limit) makes one file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HARNESS = os.path.join(REPO, "benchmarks", "reference_run", "run_reference.py")
SETTINGS = {"1m-f32": ("1m", "float32"), "12m-f32": ("12m", "float32"),
            "12m-bf16": ("12m", "bfloat16")}
ENVS, TRAIN_RATIO = 16, 512
VERSION = "e3f0224"
DJ_MAIN = "import sys; from dreamerjax.tools.cli import main; sys.exit(main())"


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", help=f"a checkout of danijar/dreamerv3 at {VERSION}")
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--programs", nargs="+", default=["reference", "dreamerjax", "vmap"],
                   choices=["reference", "dreamerjax", "vmap"])
    p.add_argument("--rows", type=int, default=6000)
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--vmap-seeds", type=int, nargs="*", default=[3, 16])
    p.add_argument("--platform", default="tpu", help="jax.platform of both programs")
    p.add_argument("--work", default=os.path.join("/tmp", "dreamerjax_chip"),
                   help="run directories and logs (outside the repository)")
    p.add_argument("--out", default=os.path.join(REPO, "results", "bench"))
    p.add_argument("--continue", dest="cont", metavar="FILE",
                   help="add to this JSON, skipping the programs it holds")
    p.add_argument("--tiny", action="store_true",
                   help="smoke only: the reference's debug widths, dreamerjax's --tiny")
    args = p.parse_args(argv)
    if "reference" in args.programs and not args.reference:
        p.error("--reference: required to run the reference (or leave it out of "
                "--programs)")
    if args.eval_every % ENVS or args.rows % args.eval_every or args.rows < 3 * args.eval_every:
        p.error(f"--eval-every {args.eval_every}: a multiple of {ENVS} that divides --rows "
                f"{args.rows} at least 3 times (the last interval must follow the first "
                "updates)")
    args.work = os.path.abspath(args.work)
    if os.path.commonpath([args.work, REPO]) == REPO:
        p.error(f"--work {args.work} is inside the repository")
    return args


def platforms(platform: str) -> str:
    """JAX_PLATFORMS for dreamerjax: the accelerator, and the CPU beside it (the bench
    lowers a program for the CPU to count its FLOPs where the accelerator gives none)."""
    return platform if platform == "cpu" else f"{platform},cpu"


def timed(cmd: list[str], env: dict, log: str) -> dict:
    """Run `cmd` to its exit, its output to `log`: wall seconds and exit code. The JSON
    keeps the command with the interpreter as `python` and the log by its name, so no
    machine's paths are written."""
    t0 = time.time()
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    shown = ["python", *(os.path.basename(c) if os.path.isabs(c) else c for c in cmd[1:])]
    return {"wall_s": time.time() - t0, "exit": code, "cmd": shown,
            "log": os.path.basename(log), "_log_path": log}


def last_interval(points: list[dict], seconds) -> dict:
    """ms per update over the last record interval; `seconds(prev, last)` is the training
    loop's seconds between the two points."""
    prev, last = points[-2], points[-1]
    n = last["updates"] - prev["updates"]
    s = seconds(prev, last)
    return {"rows": [prev["rows"], last["rows"]], "updates": n, "seconds": s,
            "ms_per_update": 1e3 * s / n if n else None}


def reference_arm(args, size: str, dtype: str, run_dir: str, log: str) -> dict:
    cmd = [sys.executable, HARNESS, "--version", VERSION, "--checkout", args.reference,
           "--env", "cartpole", "--seed", "0", "--rows", str(args.rows),
           "--eval-every", str(args.eval_every), "--eval-episodes", str(args.eval_episodes),
           "--size", size, "--no-checkpoint", "--out", run_dir,
           "--set", f"jax.platform={args.platform}", "--set", f"jax.compute_dtype={dtype}"]
    if args.tiny:
        cmd.append("--tiny")
    # JAX_THREEFRY_PARTITIONABLE: jax 0.4.33's default (e3f0224's requirements.txt), which
    # later JAX flipped; it keeps the reference's random streams its own.
    env = {**os.environ, "JAX_PLATFORMS": args.platform, "PYTHONDONTWRITEBYTECODE": "1",
           "JAX_THREEFRY_PARTITIONABLE": "false"}
    out = timed(cmd, env, log)
    if out["exit"] == 0:
        timing = json.load(open(os.path.join(run_dir, "timing.json")))
        points = timing["points"]
        # wall_s is stamped after a point's evaluation and before its checkpoint
        out["last_interval"] = last_interval(points, lambda a, b: (
            b["wall_s"] - a["wall_s"] - b["eval_s"] - a.get("checkpoint_s", 0.0)))
        out["build_s"] = timing["sessions"][0]["build_s"]
        out["loop_s"] = timing["wall_s"]
        out["eval_s"] = sum(p["eval_s"] for p in points)
    return out


def dreamerjax_arm(args, size: str, dtype: str, run_dir: str, log: str) -> dict:
    cmd = [sys.executable, "-c", DJ_MAIN, "train", "--env", "CartPole-v1",
           "--seeds", "0", "--steps", str(args.rows), "--eval-every", str(args.eval_every),
           "--eval-episodes", str(args.eval_episodes), "--num-envs", str(ENVS),
           "--train-ratio", str(TRAIN_RATIO), "--reference", VERSION,
           "--set", f"jax.compute_dtype={dtype}", "--out", run_dir]
    cmd += ["--tiny"] if args.tiny else ["--size", size]
    cache = run_dir + "_xdg_cache"  # empty: the compile is counted, as on a first run
    os.makedirs(cache, exist_ok=True)
    env = {**os.environ, "XDG_CACHE_HOME": cache, "JAX_PLATFORMS": platforms(args.platform)}
    out = timed(cmd, env, log)
    if out["exit"] == 0:
        with open(os.path.join(run_dir, "records.jsonl")) as f:
            points = [r for r in map(json.loads, f) if r.get("seed", 0) == 0]
        out["last_interval"] = last_interval(points, lambda a, b: b["host_s"]["chunk"])
        out["first_log_point_s"] = points[0]["wall_s"]
        out["loop_s"] = points[-1]["wall_s"]
        out["eval_s"] = sum(p["host_s"].get("evaluate", 0.0) for p in points)
    return out


def vmap_arm(args, size: str, dtype: str, jsonl: str, log: str) -> dict:
    cmd = [sys.executable, "-c", DJ_MAIN, "bench", "--sweep", "--sizes",
           size, "--dtypes", dtype, "--seeds",
           *map(str, args.vmap_seeds), "--set", f"reference={VERSION}", "--out", jsonl]
    cmd += ["--tiny"] if args.tiny else []
    out = timed(cmd, {**os.environ, "JAX_PLATFORMS": platforms(args.platform)}, log)
    points = {}
    if os.path.exists(jsonl):
        for line in open(jsonl):
            r = json.loads(line)
            out["device_kind"] = r.get("device_kind", out.get("device_kind"))
            if r.get("status") == "ok":
                points[str(r["seeds"])] = {
                    "ms_per_update_per_seed": 1e3 * r["seconds_per_update_per_seed"]["median"],
                    "seed_loop": r["seed_loop"], "device_kind": r["device_kind"],
                    "compile_s": r["compile_seconds"]["total"]}
    out["points"] = points
    return out


def device_kind(runs: dict) -> str | None:
    """The accelerator as JAX names it (the bench's lines record it, failed ones too)."""
    return next((run["device_kind"] for run in runs.values() if run.get("device_kind")),
                None)


def row_of(setting: str, runs: dict) -> dict:
    """The table's row from the setting's programs (None where one did not run)."""
    ref, dj, vm = (runs.get(f"{setting}/{k}", {}) for k in ("reference", "dreamerjax", "vmap"))

    def ms(run):
        return (run.get("last_interval") or {}).get("ms_per_update")

    def whole(run):
        return run["wall_s"] if run.get("exit") == 0 else None

    row = {"setting": setting, "reference_ms_per_update": ms(ref),
           "dreamerjax_ms_per_update": ms(dj), "reference_whole_s": whole(ref),
           "dreamerjax_whole_s": whole(dj),
           "device_kind": device_kind(runs)}
    for n, p in vm.get("points", {}).items():
        row[f"dreamerjax_ms_per_update_per_seed_vmap{n}"] = p["ms_per_update_per_seed"]
    if row["reference_ms_per_update"] and row["dreamerjax_ms_per_update"]:
        row["per_update_ratio"] = (row["reference_ms_per_update"]
                                   / row["dreamerjax_ms_per_update"])
    if row["reference_whole_s"] and row["dreamerjax_whole_s"]:
        row["whole_ratio"] = row["reference_whole_s"] / row["dreamerjax_whole_s"]
    return row


def git_commit() -> str | None:
    try:
        return subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=REPO,
                                       text=True, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> int:
    args = parse(argv)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    if args.cont:
        path = args.cont
        result = json.load(open(path))
    else:
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d")
        path = os.path.join(args.out, f"side_by_side_chip_{stamp}.json")
        result = {"what": __doc__.split("\n\n")[0], "runs": {}, "commands": []}
    argv = [os.path.basename(a) if os.path.isabs(a) else a for a in sys.argv[1:]]
    result["commands"].append({"argv": ["chip.py", *argv], "commit": git_commit(),
                               "date": datetime.datetime.now(
                                   datetime.UTC).isoformat(timespec="seconds"),
                               "cpus": os.cpu_count()})
    settings = {"rows": args.rows, "eval_every": args.eval_every, "envs": ENVS,
                "eval_episodes": args.eval_episodes, "train_ratio": TRAIN_RATIO,
                "seeds": 1, "version": VERSION, "tiny": args.tiny,
                "vmap_seeds": args.vmap_seeds, "platform": args.platform}
    if result.setdefault("settings", settings) != settings:
        raise SystemExit(f"--continue {path}: its settings {result['settings']} differ")
    arms = {"reference": reference_arm, "dreamerjax": dreamerjax_arm, "vmap": vmap_arm}
    for i, setting in enumerate(args.settings):
        size, dtype = SETTINGS[setting]
        order = ["reference", "dreamerjax"] if i % 2 == 0 else ["dreamerjax", "reference"]
        for program in [*order, "vmap"]:
            key = f"{setting}/{program}"
            if program not in args.programs or result["runs"].get(key, {}).get("exit") == 0:
                continue
            if program == "vmap" and not args.vmap_seeds:
                continue
            base = os.path.join(args.work, key.replace("/", "_"))
            shutil.rmtree(base, ignore_errors=True)
            if os.path.exists(base + ".jsonl"):
                os.remove(base + ".jsonl")
            target = base + ".jsonl" if program == "vmap" else base
            print(f"[chip] {key} ...", flush=True)
            run = arms[program](args, size, dtype, target, base + ".log")
            print(f"[chip] {key}: exit {run['exit']}, {run['wall_s']:.1f} s "
                  f"{(run.get('last_interval') or {}).get('ms_per_update') or ''}", flush=True)
            if run["exit"] != 0:
                with open(run["_log_path"]) as f:
                    print("".join(f.readlines()[-30:]), flush=True)
            run.pop("_log_path")
            result["runs"][key] = run
            result["rows"] = [row_of(s, result["runs"]) for s in SETTINGS
                              if any(k.startswith(s + "/") for k in result["runs"])]
            with open(path + ".tmp", "w") as f:
                json.dump(result, f, indent=1)
            os.replace(path + ".tmp", path)
    print(json.dumps(result["rows"], indent=1))
    print(f"[chip] wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
