"""The bench's options (`dreamerjax bench`'s flags, cli.BenchArgs) and defaults, and the
command line that repeats a run of it (the `command` of its JSON)."""

from __future__ import annotations

import dataclasses

ENV = "CartPole-v1"
SIZE = "1m"
REPORT_DIMS = 1345  # Craftax-Symbolic's observation width (the report bench)
MATMUL_N = 2048
DEFAULT_SEEDS = (1, 3)  # numbers of seeds in one program, the update bench's
# --tiny's: the bench's smoke check (its figures, each once), so one seed count whose
# programs compile once, in the bench's own process (update.compile_mode, seed_counts)
TINY_SEEDS = (1,)
SWEEP_SIZES = ("1m", "12m", "50m", "200m")
SWEEP_SEEDS = (1, 4, 16)
DTYPES = ("float32", "bfloat16")
COMPILE_MODES = ("auto", "in-process", "children")
# Ticks of rows in the replay before the bare update is timed (benchmarks/profile_update.py,
# side_by_side): 100 ticks of 16 envs, 1,600 rows, past the protocol's gate at 1,040.
FILL_TICKS = 100


@dataclasses.dataclass(frozen=True)
class Options:
    json: bool = False
    seeds: tuple[int, ...] | None = None  # None: DEFAULT_SEEDS (--tiny: TINY_SEEDS),
    # with --sweep SWEEP_SEEDS
    updates: int = 50  # timed updates at least (3 timed chunks at least)
    warmup: int = 3  # untimed updates after the gate chunk at least
    tiny: bool = False
    out: str | None = None  # a .json file or a folder (--sweep: a .jsonl file); None: stdout
    env: str | None = None  # a whole run of this env id instead of the update alone
    compiled: str | None = None  # --env: the compiled env to compare with ("" for none)
    stretch: int = 5  # ticks per chunk (the benched run's log interval)
    rounds: int = 3  # --env: timed chunks after the gate (0: acting alone)
    num_envs: int = 16  # --env
    set: tuple[str, ...] = ()  # --set KEY=VALUE on the benched config (with --env: both runs)
    size: str = SIZE  # model size preset (config.SIZES); --tiny overrides it
    compile: str = "auto"  # COMPILE_MODES: auto is children on a CPU, else in-process
    sweep: bool = False
    sizes: tuple[str, ...] = SWEEP_SIZES  # --sweep
    dtypes: tuple[str, ...] = DTYPES  # --sweep
    budget: float | None = None  # --sweep: start no point after this many seconds

    @classmethod
    def of(cls, args) -> Options:
        kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
              if getattr(args, f.name, None) is not None}
        if "out" in kw:
            kw["out"] = str(kw["out"])
        for name in ("seeds", "set", "sizes", "dtypes"):
            if name in kw:
                kw[name] = tuple(kw[name])
        if "seeds" in kw:
            kw["seeds"] = tuple(int(n) for n in kw["seeds"])
        return cls(**kw)


def _argv(opts: Options) -> list[str]:
    out = ["--json"] if opts.json else []
    out += ["--sweep"] if opts.sweep else []
    if opts.tiny:
        out.append("--tiny")
    for name in ("size", "updates", "warmup", "stretch", "compile", "budget"):
        value = getattr(opts, name)
        if value != getattr(Options, name):
            out += [f"--{name}", f"{value:g}" if isinstance(value, float) else str(value)]
    for name in ("seeds", "sizes", "dtypes"):
        value = getattr(opts, name)
        if value is not None and value != getattr(Options, name):
            out += [f"--{name}", *map(str, value)]
    for item in opts.set:
        out += ["--set", item]
    return out


def _env_argv(opts: Options) -> list[str]:
    out = ["--env", opts.env] + (["--json"] if opts.json else [])
    out += ["--tiny"] if opts.tiny else []
    for name in ("size", "compiled", "stretch", "rounds", "num_envs"):
        value = getattr(opts, name)
        if value != getattr(Options, name):
            out += [f"--{name.replace('_', '-')}", str(value)]
    for item in opts.set:
        out += ["--set", item]
    return out
