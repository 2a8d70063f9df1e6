"""One checkpoint's policy evaluated on several environments with the same spaces.

Does Gymnasium's float64 CartPole matter? The host-path protocol run
(results/cartpole_protocol_gym/) evaluated lower than the compiled gymnax run while its
training windows matched. This separates the two candidate causes. The same parameters
are evaluated on gymnax's CartPole-v1 (compiled evaluate) and on Gymnasium's CartPole-v1
(the host path's evaluate): if the env (or the host evaluation) were the cause, one
policy would score differently on the two; if not, the runs learned different policies.

    python benchmarks/experiments/cross_eval.py RUN_DIR [--index I] --episodes 100 --repeats 3 \
        --envs CartPole-v1 gym_CartPole-v1

Prints one JSON object: per env, every repeat's mean return and their pooled mean, the
standard error over all episodes, and the per-episode returns. Each repeat uses other
evaluation keys (log index 10**6 + repeat) and other env resets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np


def evaluate_on(run_dir: str, index: int, env: str, episodes: int, repeats: int,
                mode: bool) -> dict:
    """Returns [repeats, seeds, episodes] of checkpoint `index` of run_dir played on env."""
    from dreamerjax.run import host_loop, records
    from dreamerjax.run.plan import make_plan
    from dreamerjax.run.policy import stacked_params
    from dreamerjax.run.trainers import make_trainer

    config, seeds = records.read_run_config(run_dir)
    config = dataclasses.replace(config, run=dataclasses.replace(
        config.run, env=env, eval_episodes=episodes))
    trainer = make_trainer(make_plan(config, seeds))
    params = stacked_params(run_dir, index, config, trainer.setup.spaces, len(seeds))
    rets, lens = [], []
    for r in range(repeats):
        ret, length = trainer.evaluate(params, 10**6 + r, mode)
        rets.append(np.asarray(ret))
        lens.append(np.asarray(length))
    if hasattr(trainer, "close"):
        trainer.close()
    rets = np.stack(rets)
    return {
        "env": env, "seeds": list(seeds), "episodes": episodes, "repeats": repeats,
        "repeat_means": [round(float(x), 2) for x in rets.mean(axis=(1, 2))],
        "mean": round(float(rets.mean()), 2),
        "sem": round(float(rets.std(ddof=1) / np.sqrt(rets.size)), 2),
        "len_at_limit": int((np.stack(lens) >= host_loop.episode_limit(trainer.setup)).sum()),
        "returns": [int(x) for x in rets.reshape(-1)],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--index", type=int, help="checkpoint index (default: the latest)")
    p.add_argument("--envs", nargs="+", default=["CartPole-v1", "gym_CartPole-v1"])
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--mode", action="store_true", help="act with the modes, not samples")
    a = p.parse_args()
    if a.index is None:
        from dreamerjax.run import checkpoint
        a.index = checkpoint.latest_verified(a.run_dir)[0]
    out = {"run_dir": a.run_dir, "index": a.index, "mode": a.mode, "results": [
        evaluate_on(a.run_dir, a.index, env, a.episodes, a.repeats, a.mode)
        for env in a.envs]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
