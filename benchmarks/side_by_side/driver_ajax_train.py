"""Whole-run driver for Ajax (`ajax-rl`): its own `DreamerV3.train`, from import to the
returned state, as a user's script calls it. Run by whole_run.py in Ajax's virtual
environment as

    python driver_ajax_train.py --rows R --seeds S [--eval-every E] [--eval-episodes N]

`DreamerV3(env_id="CartPole-v1", model_size="1m")` (every other argument at its default:
16 envs, train ratio 512, batch 16 x 64 + 1 context) trains `seed=[0 .. S-1]` (Ajax vmaps
a list of seeds in one program) for `n_timesteps=R` rows per seed, evaluating
`num_episode_test=N` episodes every E rows (its LoggingConfig's log_frequency; no W&B, no
TensorBoard). The last stdout line is one JSON object: the updates per seed, the seconds of
the import, the construction and the train call, and the versions. whole_run.py times the
process itself (wall, peak RSS). Ajax's persistent compilation cache is turned off by
whole_run.py (`AJAX_NO_COMPILE_CACHE=1`), so the compile is part of the run, as on a
user's first run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def parse(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, required=True, help="rows per seed (n_timesteps)")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=2000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--tiny", action="store_true",
                   help="smoke only: the reference debug config's widths and depths")
    return p.parse_args(argv)


# --tiny: the widths and depths of the reference's `debug` config (configs.yaml:285-288 at
# 29eb964), as run_reference.py --tiny applies them, in Ajax's constructor arguments.
TINY = {"units": 8, "deter": 12, "hidden": 8, "stoch": 4, "classes": 4, "blocks": 4,
        "bins": 9, **{f"{k}_layers": 2 for k in ("enc", "dec", "rew", "con", "actor",
                                                 "critic")}}


def updates_per_seed(state) -> list[int] | None:
    """The update counter of each seed of the returned (vmapped) state, where it has one."""
    import numpy as np
    value = getattr(state, "n_updates", None)
    return None if value is None else [int(x) for x in np.ravel(np.asarray(value))]


def main(argv=None) -> int:
    args = parse(argv)
    real_stdout = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # Ajax's own prints go to the log, the result line to the real stdout
    sys.stdout = sys.stderr
    t0 = time.perf_counter()
    import jax
    from ajax.agents.DreamerV3.DreamerV3 import DreamerV3
    from ajax.logging.wandb_logging import LoggingConfig
    t1 = time.perf_counter()
    agent = DreamerV3(env_id="CartPole-v1", model_size="1m", **(TINY if args.tiny else {}))
    logging = LoggingConfig(config={}, log_frequency=args.eval_every, use_wandb=False,
                            use_tensorboard=False)
    t2 = time.perf_counter()
    seeds = list(range(args.seeds))
    out = agent.train(seed=seeds, n_timesteps=args.rows, num_episode_test=args.eval_episodes,
                      logging_config=logging)
    out = jax.block_until_ready(out)
    t3 = time.perf_counter()
    state = out[0] if isinstance(out, tuple) else out
    from importlib import metadata
    result = {
        "program": "ajax", "seeds": seeds, "rows_per_seed": args.rows,
        "updates_per_seed": updates_per_seed(state),
        "import_s": t1 - t0, "construct_s": t2 - t1, "train_s": t3 - t2,
        "jax": jax.__version__, "ajax": metadata.version("ajax-rl"),
    }
    real_stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
