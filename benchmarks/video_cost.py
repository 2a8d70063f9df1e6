"""What a video at a log point costs (`--video-every`, run/videos.py) against the log point's
evaluation: for each env, the run's evaluation (trainer.evaluate, the while loop that
stops when its episodes end) and the video of the same episodes (the first of each seed's
played again with every step recorded, then drawn, written as mp4 and encoded as the
TensorBoard GIF), with untrained params.

Prints one JSON object per env (env, size, seeds, eval_episodes, frames: the video's
frames per seed, evaluate_s: the evaluation's median wall over --repeats calls after its
compile; video_play_s: the recorded episodes' play (median, after its compile), draw_s,
mp4_s, gif_s: the host's work for every seed's video (median), gif_bytes / mp4_bytes per
seed) and nothing else.

    nice .venv/bin/python benchmarks/video_cost.py
    nice .venv/bin/python benchmarks/video_cost.py --envs Acrobot-v1 --size 12m --seeds 4
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.config.resolve import make_config
from dreamerjax.run import plan as plan_lib
from dreamerjax.run import records, videos
from dreamerjax.run.trainers import make_trainer
from dreamerjax.viz import video


def _median(fn, repeats: int) -> tuple[float, object]:
    """(median seconds of `repeats` calls, the last call's result)."""
    walls, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), out


def measure(env_id: str, size: str, seeds: int, episodes: int, repeats: int) -> dict:
    config = make_config(env_id, size=size, eval_episodes=episodes, video_every=1)
    plan = plan_lib.make_plan(config, tuple(range(seeds)))
    trainer = make_trainer(plan)
    states = trainer.init()
    params = states.agent.params
    jax.block_until_ready(trainer.evaluate(params, 0))  # compiled
    evaluate_s, _ = _median(lambda: jax.block_until_ready(trainer.evaluate(params, 0)),
                            repeats)
    log = videos.LogVideos(plan, tempfile.mkdtemp())
    policy = jax.tree.map(np.asarray, agent_lib.policy_params(config.agent, params))
    log.episodes(policy, 0)  # compiled
    play_s, episodes_ = _median(lambda: log.episodes(policy, 0), repeats)
    draw_s, drawn = _median(lambda: [video.frames(env_id, e) for e in episodes_], repeats)
    with tempfile.TemporaryDirectory() as tmp:
        mp4_s, files = _median(lambda: [video.write_video(Path(tmp) / f"{i}.mp4", f)
                                        for i, f in enumerate(drawn)], repeats)
        mp4_bytes = [f.stat().st_size for f in files]
        writer = records.RunWriter(tmp)
        stride = videos.TB_STRIDE
        gif_s, _ = _median(lambda: [writer.add_video(i, 0, "eval/video",
                                                     [x[::stride, ::stride] for x in f],
                                                     videos.FPS)
                                    for i, f in enumerate(drawn)], repeats)
        writer.close()
        gif_bytes = sum(p.stat().st_size for p in Path(tmp, records.TB_DIR).rglob("*.*"))
    log.close()
    trainer.close()
    return {"env": env_id, "size": size, "seeds": seeds, "eval_episodes": episodes,
            "frames": [len(f) for f in drawn], "evaluate_s": round(evaluate_s, 3),
            "video_play_s": round(play_s, 3), "draw_s": round(draw_s, 3),
            "mp4_s": round(mp4_s, 3), "gif_s": round(gif_s, 3), "mp4_bytes": mp4_bytes,
            "gif_bytes_per_seed_and_call": gif_bytes // (seeds * repeats)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "Acrobot-v1"])
    parser.add_argument("--size", default="1m")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for env_id in args.envs:
        print(json.dumps(measure(env_id, args.size, args.seeds, args.episodes, args.repeats)),
              flush=True)


if __name__ == "__main__":
    main()
