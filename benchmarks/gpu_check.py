"""The prepared GPU check's Python parts (benchmarks/gpu_check.sh runs them): the devices
probe, the comparison of a run's curves with a published scores file, and the one JSON.

A published scores file is the reference's format (danijar/dreamerv3, scores/*.json.gz):
gzip JSON, a list of runs {"task", "method", "seed", "xs", "ys"}, xs the env steps of the
run's logger and ys the episode returns there. The reference's logger multiplies its step
counter (agent steps summed over envs) by the suite's action repeat (dreamerv3/main.py:150,
embodied/core/logger.py:32 at 29eb964), so for dmc_* tasks xs count env frames, 2 per agent
step; ours count rows (agent steps summed over envs), so a row is `repeat` env steps.

Nothing of the reference's file is kept here: the check reads the file named at run time.

    python benchmarks/gpu_check.py devices --out FILE           # jax.devices(), versions
    python benchmarks/gpu_check.py assemble --work W --out O [--scores FILE] [--smoke]
    python benchmarks/gpu_check.py compare RUN_DIR --scores FILE   # the comparison alone
        [--task TASK] [--out JSON] [--plot PNG] [--title TEXT]

`compare` takes the task from the run's env (playground_CartpoleSwingup ->
dmc_cartpole_swingup) unless --task names it, and reads records.jsonl or records.jsonl.gz.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import gzip
import hashlib
import json
import math
import os
import platform
import re
import sys

TASK = "dmc_cartpole_balance"
METHOD = "dreamerv3"
PACKAGES = ("jax", "jaxlib", "numpy", "mujoco", "mujoco-mjx", "playground", "flax", "optax",
            "orbax-checkpoint", "tyro")

# How MuJoCo Playground's CartpoleBalance (the env trained here) differs from dm_control's
# cartpole balance (the env of the published curve), read from both sources:
# mujoco_playground/_src/dm_control_suite/cartpole.py + xmls/cartpole.xml (playground 0.2.0)
# and dm_control/suite/cartpole.py + suite/cartpole.xml (dm_control 1.0.50).
PLAYGROUND_NOTE = (
    "Same task, not the same simulator. Equal: the model (cart, one pole, slider limited to "
    "+-1.8, motor gear 10, ctrlrange [-1, 1]); the dense reward, upright * centered * "
    "small_control * small_velocity with the same tolerances (Playground scores the action "
    "it was given, dm_control physics.control(); ours is already inside ctrlrange, so they "
    "agree); the reset (cart uniform in +-0.1, pole angle uniform in +-0.034 rad, velocities "
    "0.01 * normal); the observation values and order (cart position, pole cos, pole sin, "
    "two velocities: Playground one 5-vector, dm_control 'position' (3) and 'velocity' (2), "
    "which the reference's MLP encoder concatenates); 1,000 control steps of 0.01 s per "
    "episode (Playground episode_length 1000, dm_control time limit 10 s), i.e. 500 agent "
    "steps at action repeat 2, ending as a time limit, not a termination; one physics "
    "step of 0.01 s per control step in both. Different: the physics. dm_control steps "
    "MuJoCo (C, float64) with the RK4 integrator; Playground steps MJX (JAX, float32 here, "
    "impl 'jax') with MuJoCo's default Euler integrator, eulerdamp disabled, and one "
    "constraint-solver iteration with 4 line-search iterations (which matters only when "
    "the cart reaches the slider's limit; contacts are off in both), so trajectories drift "
    "apart from the same state and actions. Playground "
    "reports done on NaN physics (a termination here); dm_control never terminates. Seeds "
    "come from JAX keys, not numpy's RandomState. The published returns are those of the "
    "reference's training episodes (its default script 'train' logs episode/score), binned "
    "every 10,000 env frames; ours are evaluation episodes of the same sampled policy "
    "(10 fresh envs per seed at each log point) and, beside them, the mean return of the "
    "training episodes that ended in each log interval.")

REFERENCE_NOTE = (
    "The scores file entered the reference with commit 2411f7d (2024-04-15, the agent of the "
    "paper's 2024 version) and is byte-identical at 29eb964 (2024-05-15) and at HEAD e3f0224; "
    "dmc_proprio at 2411f7d and 29eb964 is the same (size12m, run.train_ratio 512, run.steps "
    "3e5 agent steps, env.dmc.image False, env.dmc.repeat 2, jax.compute_dtype bfloat16), "
    "while HEAD's dmc_proprio is another setup (size1m, train_ratio 1024, 1.1e6 steps). So "
    "the curve is the 29eb964-era agent's, and the run here is configured as 29eb964 "
    "(dreamerjax's default reference) runs dmc_proprio, with the reference's bfloat16 "
    "compute. Our rows are the reference's agent steps (summed over the 16 envs of a "
    "seed), so a log point's env frames, the published x axis, are 2 x its rows.")


# ----------------------------------------------------------------------------- scores


def read_scores(path: str, task: str = TASK, method: str = METHOD) -> list[dict]:
    """The runs of `task` by `method` in a scores file (module docstring), by seed; each
    {"seed", "xs", "ys"} with xs strictly increasing. ValueError naming the file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            runs = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a gzip JSON scores file ({e})") from e
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(f"{path}: expected a JSON list of runs")
    chosen = [r for r in runs if r.get("task") == task and r.get("method") == method]
    if not chosen:
        tasks = sorted({str(r.get("task")) for r in runs})
        raise ValueError(f"{path}: no run of task {task!r} by {method!r}; tasks: "
                         f"{', '.join(tasks)}")
    out = []
    for r in chosen:
        xs, ys = [float(x) for x in r["xs"]], [float(y) for y in r["ys"]]
        if not xs or len(xs) != len(ys) or any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
            raise ValueError(f"{path}: run {task} seed {r.get('seed')}: xs and ys must be "
                             "equally long and xs strictly increasing")
        out.append({"seed": r.get("seed"), "xs": xs, "ys": ys})
    return sorted(out, key=lambda r: str(r["seed"]))


def interpolate(xs: list[float], ys: list[float], at: float) -> float | None:
    """ys linearly interpolated at `at`; None outside [xs[0], xs[-1]] (no extrapolation)."""
    if not xs[0] <= at <= xs[-1]:
        return None
    for i in range(1, len(xs)):
        if at <= xs[i]:
            w = (at - xs[i - 1]) / (xs[i] - xs[i - 1])
            return ys[i - 1] + w * (ys[i] - ys[i - 1])
    return ys[0]  # one point, at == xs[0]


def published_band(runs: list[dict], steps: list[float]) -> list[dict]:
    """Per step: mean, min and max over the runs that cover it (None when none does)."""
    band = []
    for s in steps:
        vals = [v for r in runs if (v := interpolate(r["xs"], r["ys"], s)) is not None]
        band.append({"env_steps": s, "runs": len(vals),
                     "mean": sum(vals) / len(vals) if vals else None,
                     "min": min(vals) if vals else None, "max": max(vals) if vals else None})
    return band


# ----------------------------------------------------------------------------- our run


def read_jsonl(path: str) -> list[dict]:
    """The JSON objects of a JSONL file, or of its gzipped copy PATH.gz where only that
    exists (committed results keep their records gzipped); a missing file and a torn last
    line (a run killed mid-write) read as nothing."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    if not os.path.exists(path):
        return []
    out = []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                out.append(row)
    return out


def our_curves(records: list[dict], repeat: int) -> dict:
    """Per seed (as a string key): rows, env_steps (= rows * repeat), updates, wall_s,
    eval_mean, eval_returns and train_return of each log point, in row order."""
    curves: dict[str, dict] = {}
    for r in sorted(records, key=lambda r: (r["seed"], r["rows"])):
        c = curves.setdefault(str(r["seed"]), {k: [] for k in (
            "rows", "env_steps", "updates", "wall_s", "eval_mean", "eval_returns",
            "train_return")})
        c["rows"].append(r["rows"])
        c["env_steps"].append(r["rows"] * repeat)
        for k in ("updates", "wall_s", "eval_mean", "eval_returns", "train_return"):
            c[k].append(r.get(k))
    return curves


def _position(value: float | None, lo: float | None, hi: float | None) -> str | None:
    if value is None or lo is None:
        return None
    return "below" if value < lo else "above" if value > hi else "within"


def compare_points(curves: dict, runs: list[dict], field: str) -> list[dict]:
    """One entry per log point that every seed reached: our `field` (eval_mean or
    train_return) per seed, its mean over the seeds that have one, the published band at
    the same env steps, and where our mean lies against [min, max] of the published runs
    (within_published_range: True/False, None where the published curve does not reach)."""
    seeds = sorted(curves)
    if not seeds:
        return []
    n = min(len(curves[s]["rows"]) for s in seeds)
    steps = [curves[seeds[0]]["env_steps"][i] for i in range(n)]
    points = []
    for i, band in enumerate(published_band(runs, steps)):
        ours = {s: curves[s][field][i] for s in seeds}
        vals = [v for v in ours.values() if v is not None]
        mean = sum(vals) / len(vals) if vals else None
        where = _position(mean, band["min"], band["max"])
        seeds_in = (None if band["min"] is None else
                    sum(1 for v in vals if band["min"] <= v <= band["max"]))
        points.append({
            "rows": curves[seeds[0]]["rows"][i], "env_steps": steps[i], "ours": ours,
            "ours_mean": mean, "ours_min": min(vals) if vals else None,
            "ours_max": max(vals) if vals else None, "published_runs": band["runs"],
            "published_mean": band["mean"], "published_min": band["min"],
            "published_max": band["max"], "position": where,
            "within_published_range": None if where is None else where == "within",
            "seeds_within_range": seeds_in, "seeds_with_value": len(vals)})
    return points


def summarize(points: list[dict]) -> dict:
    """Counts of the points by position, and the verdict of the last compared point."""
    compared = [p for p in points if p["position"] is not None]
    counts = {k: sum(p["position"] == k for p in compared) for k in ("below", "within",
                                                                     "above")}
    last = compared[-1] if compared else None
    return {"points": len(points), "compared": len(compared), **counts,
            "not_compared": len(points) - len(compared),
            "last_compared_env_steps": last and last["env_steps"],
            "last_within_published_range": last and last["within_published_range"]}


def task_of(config: dict) -> str:
    """The scores file's task name for a run's env: playground_CartpoleSwingup (MuJoCo
    Playground's port) and dmc_cartpole_swingup (dm_control's own) -> dmc_cartpole_swingup;
    TASK when the config names no env."""
    env = str(config.get("run", {}).get("env") or "")
    if env.startswith("playground_"):
        name = env.removeprefix("playground_")
        return "dmc_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
    return env or TASK


def repeat_of(config: dict) -> int:
    """Env frames per row: the action repeat of the run's suite (env.dmc.repeat for
    dm_control's own dmc_* tasks, else env.playground.repeat), 2 when the config has none."""
    env = str(config.get("run", {}).get("env") or "")
    suite = "dmc" if env.startswith("dmc_") else "playground"
    return int(config.get("env", {}).get(suite, {}).get("repeat", 2))


def compare_run(run_dir: str, scores: str, task: str | None = None,
                method: str = METHOD) -> dict:
    """The comparison of a run directory (records.jsonl, config.json) with a scores file;
    `task` defaults to the run's own (task_of)."""
    config = _read_json(os.path.join(run_dir, "config.json")) or {}
    task = task or task_of(config)
    repeat = repeat_of(config)
    curves = our_curves(read_jsonl(os.path.join(run_dir, "records.jsonl")), repeat)
    runs = read_scores(scores, task, method)
    out = {"env_steps_per_row": repeat, "task": task, "method": method,
           "published_seeds": [r["seed"] for r in runs]}
    for name, field in (("eval", "eval_mean"), ("train_episodes", "train_return")):
        points = compare_points(curves, runs, field)
        out[name] = {"points": points, "summary": summarize(points)}
    return out


def plot_comparison(comparison: dict, out: str, title: str = "") -> None:
    """A PNG (256 colours) of a comparison: our evaluation returns, each seed (thin) and
    their mean (thick), and our training episodes' mean (the published curve's quantity,
    where an episode ended) beside the published runs' [min, max] band and mean, at our log
    points' env frames."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    points = comparison["eval"]["points"]
    xs = [p["env_steps"] for p in points]
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=100)
    band = [(p["env_steps"], p["published_min"], p["published_max"], p["published_mean"])
            for p in points if p["published_min"] is not None]
    if band:
        bx, lo, hi, mean = zip(*band, strict=True)
        n = max(p["published_runs"] for p in points)
        ax.fill_between(bx, lo, hi, color="0.8", label=f"reference, {n} seeds: min-max")
        ax.plot(bx, mean, color="0.4", ls="--", label="reference: mean")
    for seed in sorted(points[0]["ours"], key=str) if points else []:
        ax.plot(xs, [p["ours"][seed] for p in points], color="C0", lw=0.8, alpha=0.45)
    ax.plot(xs, [p["ours_mean"] for p in points], color="C0", lw=2,
            label=f"dreamerjax, {len(points[0]['ours']) if points else 0} seeds: "
                  "evaluation, each and mean")
    train = [(p["env_steps"], p["ours_mean"]) for p in comparison["train_episodes"]["points"]
             if p["ours_mean"] is not None]
    if train:
        ax.plot(*zip(*train, strict=True), color="C1", marker="o", ls=":",
                label="dreamerjax: training episodes, mean")
    ax.set(xlabel="env frames", ylabel="episode return",
           title=title or comparison.get("task", ""))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    Image.open(out).convert("RGB").quantize(256).save(out, optimize=True)


# ----------------------------------------------------------------------------- the JSON


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def train_section(run_dir: str) -> dict | None:
    """The run's config (the parts that say what was trained), its curves per seed and its
    speed; None when the run wrote no config."""
    config = _read_json(os.path.join(run_dir, "config.json"))
    if config is None:
        return None
    repeat = repeat_of(config)
    curves = our_curves(read_jsonl(os.path.join(run_dir, "records.jsonl")), repeat)
    agent = config.get("agent", {})
    # Updates per second between consecutive log points, of the first seed: every seed
    # runs in the same program, with the same update counts and wall clock.
    first = next(iter(curves.values()), {"rows": [], "updates": [], "wall_s": []})
    speed = []
    for i in range(1, len(first["rows"])):
        du = first["updates"][i] - first["updates"][i - 1]
        dt = first["wall_s"][i] - first["wall_s"][i - 1]
        speed.append(du / dt if dt else None)
    return {"config": {"size": config.get("size"), "seeds": config.get("seeds"),
                       "run": config.get("run"), "env_playground": config.get("env", {})
                       .get("playground"), "compute_dtype": agent.get("compute_dtype"),
                       "reference": agent.get("reference"), "rssm": agent.get("rssm")},
            "env_steps_per_row": repeat, "log_points": min(
                (len(c["rows"]) for c in curves.values()), default=0),
            "updates_per_s_between_log_points": speed, "curves": curves}


def stage_entries(work: str) -> list[dict]:
    """The stages as gpu_check.sh recorded them, each with its log's last lines if it
    did not end well."""
    stages = read_jsonl(os.path.join(work, "stages.jsonl"))
    for s in stages:
        if s.get("status") not in ("ok", "skipped") and s.get("log"):
            try:
                with open(s["log"], encoding="utf-8", errors="replace") as f:
                    s["log_tail"] = f.read()[-3000:]
            except OSError:
                pass
    return stages


def assemble(work: str, scores: str | None, smoke: bool, budget: float) -> dict:
    """Everything the check has written under `work` so far, as one JSON object."""
    result = {
        "what": "dreamerjax prepared GPU check (benchmarks/gpu_check.sh)",
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "smoke": smoke, "budget_s": budget,
        "git_commit": (_read_text(os.path.join(work, "git_commit.txt")) or None),
        "devices": _read_json(os.path.join(work, "devices.json")),
        "stages": stage_entries(work),
        "bench": {os.path.basename(p)[len("bench_"):-len(".json")]: _read_json(p)
                  for p in sorted(glob.glob(os.path.join(work, "bench", "bench_*.json")))},
        "data_parallel": _read_json(os.path.join(work, "data_parallel.json")),
        "replay_memory": _read_json(os.path.join(work, "replay_memory.json")),
        "train_command": _read_text(os.path.join(work, "train_command.txt")),
        "train": train_section(os.path.join(work, "run")),
        "notes": {"playground_vs_dm_control": PLAYGROUND_NOTE,
                  "reference_version": REFERENCE_NOTE},
    }
    result["published"], result["comparison"] = _published(work, scores)
    result["verdict"] = _verdict(result["comparison"])
    return result


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def _published(work: str, scores: str | None) -> tuple[dict, dict | None]:
    if not scores:
        return {"file": None, "error": "no scores file given (SCORES=...)"}, None
    info = {"file": scores, "task": TASK, "method": METHOD,
            "x_axis": "env frames: agent steps x the action repeat (2)"}
    try:
        info["sha256"] = _sha256(scores)
        info["runs"] = len(read_scores(scores))
    except (OSError, ValueError) as e:
        return dict(info, error=str(e)), None
    if not os.path.exists(os.path.join(work, "run", "config.json")):
        return info, None
    return info, compare_run(os.path.join(work, "run"), scores)


def _verdict(comparison: dict | None) -> dict | None:
    if comparison is None:
        return None
    ev = comparison["eval"]["summary"]
    return {"eval_points_within_published_range": ev["within"],
            "eval_points_compared": ev["compared"],
            "eval_last_within_published_range": ev["last_within_published_range"],
            "train_episodes_last_within_published_range":
                comparison["train_episodes"]["summary"]["last_within_published_range"]}


def write_json(obj, path: str) -> None:
    """Strict JSON (non-finite floats as null) written atomically."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_finite(obj), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def _finite(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


# ----------------------------------------------------------------------------- devices


def devices() -> dict:
    """jax.devices(), the backend, package versions and whether Playground imports."""
    from importlib import metadata

    import jax
    devs = jax.devices()
    versions = {}
    for name in PACKAGES + tuple(d for d in _installed(metadata) if "jax-cuda" in d):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    try:
        import mujoco_playground  # noqa: F401
        playground = None
    except Exception as e:  # the train stage needs it; say why it cannot run
        playground = f"{type(e).__name__}: {e}"
    return {"backend": jax.default_backend(), "jax": jax.__version__,
            "devices": [str(d) for d in devs],
            "kinds": sorted({getattr(d, "device_kind", "") for d in devs}),
            "python": platform.python_version(), "versions": versions,
            "playground_import_error": playground}


def _installed(metadata) -> list[str]:
    return sorted({d.metadata["Name"].lower() for d in metadata.distributions()
                   if d.metadata["Name"]})


# ----------------------------------------------------------------------------- main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("devices")
    d.add_argument("--out", required=True, help="the JSON file to write")
    a = sub.add_parser("assemble")
    a.add_argument("--work", required=True)
    a.add_argument("--out", required=True, help="the JSON file to (re)write")
    a.add_argument("--scores", default="")
    a.add_argument("--smoke", action="store_true")
    a.add_argument("--budget", type=float, default=0.0)
    c = sub.add_parser("compare")
    c.add_argument("run_dir")
    c.add_argument("--scores", required=True)
    c.add_argument("--task", default=None,
                   help="the scores file's task (default: the run's env, task_of)")
    c.add_argument("--out", default=None, help="write the JSON here (default: stdout)")
    c.add_argument("--plot", default=None, help="also draw the curves into this PNG")
    c.add_argument("--title", default="", help="the plot's title (default: the task)")
    args = p.parse_args(argv)
    if args.cmd == "devices":
        write_json(devices(), args.out)
    elif args.cmd == "assemble":
        write_json(assemble(args.work, args.scores or None, args.smoke, args.budget), args.out)
    else:
        comparison = _finite(compare_run(args.run_dir, args.scores, args.task))
        if args.out:
            write_json(comparison, args.out)
        else:
            json.dump(comparison, sys.stdout, indent=1)
            print()
        if args.plot:
            plot_comparison(comparison, args.plot, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
