"""Side-by-side bench: the reference (danijar/dreamerv3 @29eb964), Ajax and dreamerjax, each
timing its own jitted train step of the protocol's 1m CartPole configuration (batch 16 x 65
rows, float32) on this machine, alternated in one run. Standard library only.

    python benchmarks/side_by_side/run.py --reference CHECKOUT [--work DIR] [--out DIR]

CHECKOUT is a plain export of the reference at 29eb964 (`git worktree`, or `git archive
29eb964 | tar -x -C DIR`); its files are checked against the blob hashes of that commit
and nothing of it is copied. Two virtual environments are built under --work (outside the
repository): the reference's (jax 0.4.26 and the versions it was written against) and
Ajax's (`ajax-rl` from the package index, on the jax version dreamerjax runs on).
dreamerjax runs on --dreamerjax-python (default: the repository's .venv).

Every program runs in its own long-lived process (driver_*.py, protocol in _serve.py):
the processes start and compile one after another (cold compile, no persistent cache),
then each round times every program in turn (reference, Ajax, dreamerjax, dreamerjax with
3 vmapped seeds; R1 A B C D, R2 A B C D, ...), each with --warmup untimed and --updates
timed calls, so a change in the machine's load hits every program alike. The JSON written to
--out/side_by_side_YYYYMMDD.json holds every timed call, per-round median/p10/p90, cold
compile, peak RSS, the float32 matmul peak as `dreamerjax bench` measures it (before and
after), load averages and the machine. table.py prints the README table from it.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE_COMMIT = "29eb964e2918a3f4db04086f7f51b60388e97f3d"
# Git blob hashes of the reference files the train step runs, at REFERENCE_COMMIT
# (`git ls-tree 29eb964 dreamerv3/`): a checkout that differs is refused.
REFERENCE_BLOBS = {
    "dreamerv3/agent.py": "cc2752f64324465177434c53ae080652832a79d2",
    "dreamerv3/configs.yaml": "090614d99853f2805164aea1441b0cdb772358c1",
    "dreamerv3/jaxagent.py": "f2ad269530e84d3b99f767ebfedf0c5241abbdd9",
    "dreamerv3/jaxutils.py": "e5a970b05e21f908c0f262d6b320eaf756807c56",
    "dreamerv3/nets.py": "24ceac2032811d3e77489d26f0ed01237590bfc4",
    "dreamerv3/ninjax.py": "0bc9e7454c64dab8929ba6b352d733dc5e09f317",
}
REFERENCE_REQUIREMENTS = [
    "jax==0.4.26", "jaxlib==0.4.26", "numpy==1.26.4", "optax==0.2.2",
    "tensorflow-probability==0.24.0", "chex==0.1.86", "einops", "ruamel.yaml",
    # what `import embodied` and the agent's modules need besides (no tensorflow, no gym)
    "psutil", "pyzmq", "cloudpickle", "msgpack",
]
AJAX_VERSION = "0.4.0"
PROGRAMS = ("reference", "ajax", "dreamerjax", "dreamerjax_3seeds")


# ----------------------------------------------------------------------------- checks


def git_blob_sha1(path: str) -> str:
    with open(path, "rb") as f:
        data = f.read()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def check_reference(path: str) -> dict:
    """Refuse a checkout that is not 29eb964's; returns the hashes checked."""
    if not os.path.isdir(os.path.join(path, "dreamerv3")) or not os.path.isdir(
            os.path.join(path, "embodied")):
        raise SystemExit(f"--reference: {path} has no dreamerv3/ and embodied/ "
                         "(a checkout of danijar/dreamerv3 at 29eb964)")
    out = {}
    for rel, want in REFERENCE_BLOBS.items():
        got = git_blob_sha1(os.path.join(path, rel))
        if got != want:
            raise SystemExit(f"--reference: {rel} is not the file of 29eb964 (blob {got}, "
                             f"want {want})")
        out[rel] = got
    return out


def python_version(exe: str) -> tuple[int, int] | None:
    try:
        proc = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    if proc.returncode:
        return None
    major, minor = proc.stdout.split()
    return int(major), int(minor)


def find_python(given: str | None, versions: list[tuple[int, int]], flag: str) -> str:
    """An interpreter of one of `versions`: `given`, else pythonX.Y on PATH, else pyenv's."""
    if given:
        if python_version(given) not in versions:
            raise SystemExit(f"{flag}: {given} is not Python {_names(versions)}")
        return given
    for major, minor in versions:
        cands = [shutil.which(f"python{major}.{minor}")] + sorted(glob.glob(os.path.expanduser(
            f"~/.pyenv/versions/{major}.{minor}.*/bin/python{major}.{minor}")))
        for c in cands:
            if c and python_version(c) == (major, minor):
                return c
    raise SystemExit(f"{flag}: no Python {_names(versions)} found; pass one with {flag}")


def _names(versions) -> str:
    return " or ".join(f"{a}.{b}" for a, b in versions)


# ----------------------------------------------------------------------------- venvs


def ensure_venv(path: str, python: str, requirements: list[str], log) -> str:
    """A virtual environment at `path` with `requirements` installed (rebuilt when the list
    changes). Returns its python."""
    exe = os.path.join(path, "bin", "python")
    marker = os.path.join(path, "side_by_side_requirements.json")
    want = {"python": python_version(python), "requirements": requirements}
    if os.path.exists(marker):
        with open(marker) as f:
            if json.load(f) == json.loads(json.dumps(want)):
                return exe
        shutil.rmtree(path)
    log(f"building {path} ({' '.join(requirements)})")
    subprocess.run([python, "-m", "venv", path], check=True)
    subprocess.run([exe, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([exe, "-m", "pip", "install", "-q", *requirements], check=True)
    with open(marker, "w") as f:
        json.dump(want, f)
    return exe


def pip_freeze(exe: str) -> list[str]:
    proc = subprocess.run([exe, "-m", "pip", "freeze"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.split()


def jax_version(exe: str) -> str:
    proc = subprocess.run([exe, "-c", "import importlib.metadata as m; "
                           "print(m.version('jax'), m.version('jaxlib'))"],
                          capture_output=True, text=True, check=True)
    jax, jaxlib = proc.stdout.split()
    if jax != jaxlib:
        raise SystemExit(f"--dreamerjax-python: jax {jax} and jaxlib {jaxlib} differ")
    return jax


# ----------------------------------------------------------------------------- drivers


class Driver:
    """One program's long-lived driver process (see _serve.py)."""

    def __init__(self, name: str, argv: list[str], env: dict, log_path: str):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        read, write = os.pipe()
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=write,
                                     stderr=self.log, env=env, text=True, cwd=HERE)
        os.close(write)
        self.replies = os.fdopen(read)

    def read(self) -> dict:
        line = self.replies.readline()
        if not line:
            code = self.proc.wait()
            with open(self.log_path) as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"{self.name} driver exited ({code}); log {self.log_path}:\n"
                               f"{tail}")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(f"{self.name}: {out['error']}")
        return out

    def ask(self, cmd: dict) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> dict:
        out = self.ask({"cmd": "quit"})
        self.proc.wait(timeout=120)
        self.log.close()
        return out


def stats(xs: list[float]) -> dict:
    s = sorted(xs)

    def pct(q):  # linear interpolation, as numpy.percentile's default
        k = (len(s) - 1) * q
        lo = int(k)
        hi = min(lo + 1, len(s) - 1)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)
    return {"median": statistics.median(s), "p10": pct(0.1), "p90": pct(0.9),
            "mean": statistics.fmean(s), "n": len(s)}


# ----------------------------------------------------------------------------- machine


def machine() -> dict:
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = val.strip()
                if key.strip() == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) / 1024 ** 2
    except OSError:
        pass
    return {
        "cpu": model, "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "simd": [f for f in ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16",
                             "amx_tile") if f in flags],
        "memory_gib": mem, "kernel": platform.release(), "python_run": platform.python_version(),
        "hypervisor": "hypervisor" in flags,
    }


def git_state() -> dict:
    def git(*args):
        p = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True,
                           check=False)
        return p.stdout
    return {"commit": git("rev-parse", "HEAD").strip(),
            "dirty_paths_dreamerjax": [ln[3:] for ln in git(
                "status", "--porcelain", "--", "dreamerjax").splitlines() if ln.strip()]}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ----------------------------------------------------------------------------- run


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reference", required=True,
                   help="a checkout (worktree or archive export) of danijar/dreamerv3 at 29eb964")
    p.add_argument("--work", default=os.path.expanduser("~/.cache/dreamerjax/side_by_side"),
                   help="where the two virtual environments and the logs go (outside the repo)")
    p.add_argument("--out", default=os.path.join(REPO, "results", "bench"),
                   help="folder of side_by_side_YYYYMMDD.json")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--updates", type=int, default=20, help="timed calls per program per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls before them")
    p.add_argument("--programs", nargs="+", default=list(PROGRAMS), choices=PROGRAMS)
    p.add_argument("--python-reference", help="Python 3.10-3.12 for the reference's venv")
    p.add_argument("--python-ajax", help="Python >= 3.12 for Ajax's venv")
    p.add_argument("--dreamerjax-python", default=os.path.join(REPO, ".venv", "bin", "python"))
    p.add_argument("--ajax-jax", default="same",
                   help="jax version pinned in Ajax's venv: 'same' (as dreamerjax), "
                        "'any' (what pip resolves) or a version")
    p.add_argument("--setup-only", action="store_true", help="build the venvs, time nothing")
    args = p.parse_args(argv)
    for flag in ("rounds", "updates"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"--{flag} must be >= 1, got {getattr(args, flag)}")
    if args.warmup < 0:
        raise SystemExit(f"--warmup must be >= 0, got {args.warmup}")
    args.reference = os.path.abspath(args.reference)
    args.work = os.path.abspath(args.work)
    if os.path.commonpath([args.work, REPO]) == REPO:
        raise SystemExit(f"--work: {args.work} is inside the repository; pick a folder "
                         "outside it")
    if not os.path.exists(args.dreamerjax_python):
        raise SystemExit(f"--dreamerjax-python: {args.dreamerjax_python} does not exist")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    log = lambda msg: print(f"[side_by_side {time.strftime('%H:%M:%S')}] {msg}",  # noqa: E731
                            file=sys.stderr, flush=True)
    blobs = check_reference(args.reference) if "reference" in args.programs else {}
    os.makedirs(args.work, exist_ok=True)
    dj_jax = jax_version(args.dreamerjax_python)
    pythons = {"dreamerjax": args.dreamerjax_python}
    if "reference" in args.programs:
        py = find_python(args.python_reference, [(3, 11), (3, 12), (3, 10)],
                         "--python-reference")
        pythons["reference"] = ensure_venv(os.path.join(args.work, "venv_reference"), py,
                                           REFERENCE_REQUIREMENTS, log)
    if "ajax" in args.programs:
        py = find_python(args.python_ajax, [(3, 12), (3, 13)], "--python-ajax")
        pin = {"same": dj_jax, "any": None}.get(args.ajax_jax, args.ajax_jax)
        reqs = [f"ajax-rl=={AJAX_VERSION}"] + ([f"jax=={pin}", f"jaxlib=={pin}"] if pin else [])
        pythons["ajax"] = ensure_venv(os.path.join(args.work, "venv_ajax"), py, reqs, log)
    if args.setup_only:
        log("venvs ready: " + ", ".join(f"{k}={v}" for k, v in pythons.items()))
        return 0

    nice = os.nice(0)
    if nice:
        log(f"warning: this process runs at nice {nice}; the figures are for niced programs")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_PLATFORMS")}
    base.update(JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1")
    specs = {
        "reference": ([pythons.get("reference"), "driver_reference.py", args.reference],
                      {"PYTHONPATH": args.reference}),
        "ajax": ([pythons.get("ajax"), "driver_ajax.py"], {"AJAX_NO_COMPILE_CACHE": "1"}),
        "dreamerjax": ([pythons["dreamerjax"], "driver_dreamerjax.py", "--seeds", "1"], {}),
        "dreamerjax_3seeds": ([pythons["dreamerjax"], "driver_dreamerjax.py", "--seeds", "3"],
                              {}),
    }
    order = [p for p in PROGRAMS if p in args.programs]
    stamp = datetime.datetime.now(datetime.UTC)
    logs = os.path.join(args.work, "logs", stamp.strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(logs)
    result = {
        "date": stamp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(), "nice": nice,
        "config": {"env": "CartPole-v1", "size": "1m", "batch_size": 16,
                   "batch_rows": 65, "trained_rows": 64, "dtype": "float32",
                   "imag_length": 15, "rounds": args.rounds, "updates": args.updates,
                   "warmup": args.warmup, "order": order},
        "dreamerjax_git": git_state(), "reference_blobs": blobs,
        "reference_commit": REFERENCE_COMMIT if blobs else None,
        "loadavg_before": load(), "programs": {}, "matmul_peak": {},
        "command": "python benchmarks/side_by_side/run.py " + " ".join(
            a if a != args.reference else "CHECKOUT" for a in (argv or sys.argv[1:])),
    }
    drivers = {}
    try:
        # Start and compile one at a time so no compile competes with another.
        for name in order:
            argv_, extra = specs[name]
            log(f"starting {name} (compiling)")
            d = Driver(name, argv_, {**base, **extra}, os.path.join(logs, f"{name}.log"))
            ready = d.read()
            ready["startup_s"] = time.perf_counter() - d.t0
            drivers[name] = d
            result["programs"][name] = {"info": ready, "rounds": [], "load_at_round": [],
                                        "versions": pip_freeze(argv_[0])}
            log(f"{name}: compiled in {ready['compile_cold_s']:.1f} s, "
                f"RSS {ready['rss_mib']:.0f} MiB")
        peaker = drivers.get("dreamerjax") or drivers.get("dreamerjax_3seeds")
        if peaker:
            result["matmul_peak"]["before"] = peaker.ask({"cmd": "matmul_peak"})
        for r in range(args.rounds):
            for name in order:
                rec = result["programs"][name]
                rec["load_at_round"].append(load())
                out = drivers[name].ask({"cmd": "time", "warmup": args.warmup,
                                         "updates": args.updates})
                seeds = rec["info"].get("seeds", 1)
                per_seed = [s / seeds for s in out["seconds"]]
                rec["rounds"].append({**stats(per_seed), "seconds_per_call": out["seconds"],
                                      "rss_mib": out["rss_mib"],
                                      "finite": out.get("finite")})
                log(f"round {r + 1} {name}: {rec['rounds'][-1]['median']:.3f} s/update/seed "
                    f"(p10 {rec['rounds'][-1]['p10']:.3f}, p90 {rec['rounds'][-1]['p90']:.3f})"
                    f", load {rec['load_at_round'][-1][0]}")
        if peaker:
            result["matmul_peak"]["after"] = peaker.ask({"cmd": "matmul_peak"})
        result["loadavg_after"] = load()
        for name in order:
            end = drivers.pop(name).close()
            rec = result["programs"][name]
            rec["peak_rss_mib"] = end["rss_mib"]
            every = [s for rd in rec["rounds"] for s in rd["seconds_per_call"]]
            seeds = rec["info"].get("seeds", 1)
            rec["all_rounds"] = stats([s / seeds for s in every])
            rec["seconds_per_update_per_seed_rounds"] = [rd["median"] for rd in rec["rounds"]]
            rec["compile_cold_s"] = rec["info"]["compile_cold_s"]
    finally:
        for d in drivers.values():
            d.proc.kill()
    result["logs"] = logs
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"side_by_side_{stamp.strftime('%Y%m%d')}.json")
    if os.path.exists(path):  # a second run that day keeps the first (sorts after it)
        path = path[:-len(".json")] + f"_{stamp.strftime('%H%M%S')}.json"
    with open(path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    log(f"written {path}")
    sys.path.insert(0, HERE)
    import table
    print(table.markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
