"""Driver for dreamerjax: the program `dreamerjax bench` times (dreamerjax/tools/bench/programs.py).

Run by run.py with the project's Python as `python driver_dreamerjax.py [--seeds N]`. The
timed program is `jit(over_seeds(train_once), donate_argnums=0)` over N seeds (vmapped,
or mapped one after the other as run.seed_loop resolves: mapped on a CPU) (sample a batch of
16 x 65 rows from the replay, online queue first; one agent update; write the posterior
latents back), on a replay filled by 100 ticks of `act_and_store` (1,600 rows), exactly as
`dreamerjax bench` builds and times it; seconds are per call (divide by N for per seed).

Compile: trace + lower + compile with the persistent compilation cache off, so it is cold
(`dreamerjax bench` measures its cold compile in a fresh process with an empty cache; here
the process is fresh too). `matmul_peak` answers the bench's float32 2048^3 matmul peak.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _serve  # noqa: E402


def build(num_seeds: int):
    from dreamerjax.run import xla_tuning
    xla_tuning.apply()  # as `dreamerjax bench` and the command line do, before JAX starts
    import jax
    import numpy as np

    jax.config.update("jax_enable_compilation_cache", False)
    from dreamerjax.tools import bench

    setup = bench.make_setup(False)
    compiled, secs = bench.compile_update(setup, num_seeds)
    fill = bench.ticks_program(setup, bench.FILL_TICKS)
    box = {"states": jax.block_until_ready(fill(bench.init_states(setup, num_seeds)))}

    def step():
        box["states"] = jax.block_until_ready(compiled(box["states"]))

    def check():
        bad = np.asarray(box["states"].bad_update)
        return {"finite": bool((bad < 0).all())}

    def peak():
        return {"matmul_peak_flops_per_s": bench.matmul_peak(), "matmul_n": bench.MATMUL_N}

    import dreamerjax
    from dreamerjax.run import loop as train
    run = setup.run
    info = {
        "program": "dreamerjax", "seeds": num_seeds, "jax": jax.__version__,
        "jaxlib": __import__("jaxlib").__version__, "numpy": np.__version__,
        "dreamerjax": getattr(dreamerjax, "__version__", None),
        "batch": [run.batch_size, run.batch_length + 1],
        "trace_s": secs["trace"], "lower_s": secs["lower"], "compile_s": secs["compile"],
        "compile_cold_s": secs["total"], "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "flops_per_update_xla": float(bench._cost(compiled)["flops"]) / num_seeds,
        "seed_loop": train.seed_loop(setup),
        "what": "jit(over_seeds(loop.train_once), donate_argnums=0) of dreamerjax bench: "
                "sample + update + write-back, replay filled by 100 ticks of act_and_store",
    }
    return step, info, check, {"matmul_peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1, help="seeds in one program")
    args = parser.parse_args()
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    _serve.claim_stdout()
    step, info, check, extra = build(args.seeds)
    _serve.serve(step, info, check, extra)


if __name__ == "__main__":
    main()
