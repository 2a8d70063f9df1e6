"""What the world model sees: the reference's open-loop report (agent.py:401-446 @29eb964).

From replayed sequences, the world model observes a context of `report_openl_context`
rows (configs.yaml:108, 8; at most half the sequence), then imagines the rest with the
actions that were taken, and decodes both parts. Truth against prediction:

    openl_<key>.png / .gif   image keys: rows of truth | prediction | error per sequence
                             (the reference's openl video: error = (pred - true + 1) / 2)
    openl_vector.png         vector keys: every dimension, truth against prediction,
                             plus the predicted reward and continue against the real ones

`openl` runs on device (jittable); `write_openl` draws on the host.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dreamerjax.algo import agent as agent_lib
from dreamerjax.algo import nets
from dreamerjax.algo import numerics as nm

OPENL_CONTEXT = 8  # report_openl_context, configs.yaml:108 @29eb964
SEQUENCES = 6  # the reference shows the first 6 sequences (agent.py:443)

f32 = jnp.float32


def openl(params, cfg, spaces, batch: dict, context: int = OPENL_CONTEXT) -> dict:
    """Open-loop predictions of a replay batch [B, 1+T, ...] (row 0 is the replay context).

    Latents and imagined steps take the mode (a report, not a sample). Returns host-ready
    arrays [B, T, ...]: truth and pred per decoded key (vectors in observation space,
    images in [0, 1]), reward / pred_reward, cont / pred_cont, and `context` (the number
    of observed rows; the rest are imagined).
    """
    carry, data = agent_lib.split_context(cfg, spaces, batch)
    obs = agent_lib.preprocess(spaces, data["obs"], agent_lib.compute_dtype(cfg))
    T = data["is_first"].shape[1]
    n = min(context, T // 2)
    prevacts = agent_lib.embed_action(
        jnp.concatenate([carry["action"][:, None], data["action"][:, :-1]], 1), spaces)
    embed = nets.encode(params["enc"], cfg, spaces, obs)
    key = jax.random.PRNGKey(0)  # unused: mode everywhere
    lat0 = {"deter": carry["deter"], "stoch": carry["stoch"]}
    start, rec = nets.observe(params["dyn"], cfg.rssm, lat0, prevacts[:, :n], embed[:, :n],
                              data["is_first"][:, :n], key, mode=True)

    def step(c, a):
        return nets.img_step(params["dyn"], cfg.rssm, c, a, key, mode=True)

    _, img = jax.lax.scan(step, start, jnp.swapaxes(prevacts[:, n:], 0, 1))
    img = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), img)
    lat = jax.tree.map(lambda a, b: jnp.concatenate([a, b], 1),
                       {k: rec[k] for k in ("deter", "stoch")},
                       {k: img[k] for k in ("deter", "stoch")})
    dec = nets.decode(params["dec"], cfg, spaces, lat)
    x = nets.feat(lat)
    out = {"context": n,
           "reward": data["reward"].astype(f32),
           "cont": 1.0 - data["is_terminal"].astype(f32),
           "pred_reward": agent_lib.twohot_expectation(
               cfg, agent_lib.reward_logits(params["rew"], cfg, x), agent_lib.reward_bins(cfg)),
           "pred_cont": nm.bernoulli_mean(agent_lib.cont_logit(params["con"], cfg, x))}
    for name in spaces.dec_vector_keys:
        out[f"truth/{name}"] = obs[name]
        out[f"pred/{name}"] = nm.symexp(dec[name])
    for name in spaces.dec_image_keys:
        out[f"truth/{name}"] = obs[name].astype(f32)
        out[f"pred/{name}"] = dec[name]
    return out


def image_strip(truth: np.ndarray, pred: np.ndarray, sequences: int = SEQUENCES) -> np.ndarray:
    """truth, pred [B, T, H, W, C] in [0, 1] -> uint8 frames [T, S*3H, W, C]: for each of
    the first S sequences a column block of truth, prediction and error."""
    t, p = truth[:sequences], pred[:sequences]
    error = (p - t + 1.0) / 2.0
    video = np.concatenate([t, p, error], axis=2)  # [S, T, 3H, W, C]
    video = np.concatenate(list(video), axis=2)  # [T, 3H, S*W, C]
    video = np.clip(video * 255.0 + 0.5, 0, 255).astype(np.uint8)
    if video.shape[-1] == 1:
        video = np.repeat(video, 3, -1)
    return video


def write_openl(report: dict, directory: str | os.PathLike, title: str = "") -> list[Path]:
    """Draw a report (host arrays of `openl`) into `directory`; returns the files."""
    import imageio.v3 as iio
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    n = int(report["context"])
    written = []
    keys = sorted(k.split("/", 1)[1] for k in report if k.startswith("truth/"))
    images = [k for k in keys if np.asarray(report[f"truth/{k}"]).ndim == 5]
    vectors = [k for k in keys if k not in images]
    for key in images:
        frames = image_strip(np.asarray(report[f"truth/{key}"]),
                             np.asarray(report[f"pred/{key}"]))
        strip = np.concatenate(list(frames), axis=1)  # time left to right
        png = directory / f"openl_{key}.png"
        iio.imwrite(png, strip)
        gif = directory / f"openl_{key}.gif"
        iio.imwrite(gif, list(frames), duration=200, loop=0)
        written += [png, gif]
    if vectors:
        dims = [(k, d) for k in vectors for d in range(np.asarray(report[f"truth/{k}"]).shape[-1])]
        panels = dims + [("reward", None), ("cont", None)]
        cols = min(4, len(panels))
        rows = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows),
                                 constrained_layout=True, squeeze=False)
        try:
            for ax, (key, d) in zip(axes.flat, panels, strict=False):
                if d is None:
                    truth, pred = report[key][0], report[f"pred_{key}"][0]
                    label = key
                else:
                    truth = report[f"truth/{key}"][0, :, d]
                    pred = report[f"pred/{key}"][0, :, d]
                    label = f"{key}[{d}]"
                t = np.arange(len(truth))
                ax.plot(t, truth, color="black", linewidth=1.2, label="truth")
                ax.plot(t, pred, color="tab:red", linewidth=1.2, linestyle="--",
                        label="prediction")
                ax.axvspan(-0.5, n - 0.5, color="tab:blue", alpha=0.12, linewidth=0)
                ax.set_title(label, fontsize="small")
                ax.grid(alpha=0.3)
            for ax in list(axes.flat)[len(panels):]:
                ax.set_visible(False)
            axes.flat[0].legend(fontsize="x-small", loc="best")
            fig.suptitle(f"{title}open loop: {n} rows observed (shaded), the rest imagined "
                         "with the actions taken")
            path = directory / "openl_vector.png"
            fig.savefig(path, dpi=100)
            written.append(path)
        finally:
            plt.close(fig)
    return written
