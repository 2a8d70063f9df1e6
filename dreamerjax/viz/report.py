"""What the world model sees: the reference's open-loop report (agent.py:401-446 @29eb964).

From replayed sequences, the world model observes a context of `report_openl_context`
rows (configs.yaml:108, 8; at most half the sequence), then imagines the rest with the
actions that were taken, and decodes both parts. Truth against prediction:

    openl_<key>.png / .gif   image keys: rows of truth | prediction | error per sequence
                             (the reference's openl video: error = (pred - true + 1) / 2)
    openl_vector.png         vector keys: at most VECTOR_PANELS (8) dimensions, truth
                             against prediction: all of them in order when there are no
                             more, else the 8 with the largest open-loop error (mean
                             |prediction - truth| over the imagined rows), named with
                             their error in the titles; plus the predicted reward and
                             continue against the real ones
    openl_vector_heatmap.png every vector dimension at once: truth, prediction and error
                             as heat maps over dimensions x time, and each dimension's
                             open-loop error

Both vector pictures have a fixed size whatever the observation's width (a Craftax-
Symbolic observation has 1,345 dimensions), so the report's cost does not grow with it.

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
from dreamerjax.algo import spaces as spaces_lib

OPENL_CONTEXT = 8  # report_openl_context, configs.yaml:108 @29eb964
SEQUENCES = 6  # the reference shows the first 6 sequences (agent.py:443)
VECTOR_PANELS = 8  # vector dimensions drawn as their own panels (the rest: the heat map)

f32 = jnp.float32


def openl(params, cfg, spaces, batch: dict, context: int = OPENL_CONTEXT,
          sequences: int = SEQUENCES) -> dict:
    """Open-loop predictions of the first `sequences` of a replay batch [B, 1+T, ...]
    (row 0 is the replay context); the pictures show no more, so no more are computed or
    copied to the host (each sequence's predictions are its own).

    Latents and imagined steps take the mode (a report, not a sample). Returns host-ready
    arrays [S, T, ...]: truth and pred per decoded key (vectors in observation space,
    images in [0, 1]), reward / pred_reward, cont / pred_cont, and `context` (the number
    of observed rows; the rest are imagined).
    """
    batch = jax.tree.map(lambda x: x[:sequences], batch)
    carry, data = agent_lib.split_context(cfg, spaces, batch)
    obs = spaces_lib.preprocess(spaces, data["obs"], agent_lib.compute_dtype(cfg))
    T = data["is_first"].shape[1]
    n = min(context, T // 2)
    prevacts = agent_lib.embed_action(
        jnp.concatenate([carry["action"][:, None], data["action"][:, :-1]], 1), spaces)
    embed = nets.encode(params["enc"], cfg, spaces, obs)
    key = jax.random.PRNGKey(0)  # unused: mode everywhere
    lat0 = {"deter": carry["deter"], "stoch": carry["stoch"]}
    start, rec = nets.observe(params["dyn"], cfg.rssm, lat0, prevacts[:, :n], embed[:, :n],
                              data["is_first"][:, :n], key, mode=True, version=cfg.version)

    def step(c, a):
        return nets.img_step(params["dyn"], cfg.rssm, c, a, key, mode=True,
                             version=cfg.version)

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


def write_openl(report: dict, directory: str | os.PathLike, title: str = "",
                panels: int = VECTOR_PANELS) -> list[Path]:
    """Draw a report (host arrays of `openl`) into `directory`; returns the files.

    Image keys: a strip and a GIF each. Vector keys: `openl_vector.png` with at most
    `panels` dimensions (chosen_dims) plus reward and continue, and
    `openl_vector_heatmap.png` with every dimension; both pictures have a fixed size
    whatever the observation's width.
    """
    import imageio.v3 as iio
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
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
        written.append(_vector_panels(plt, report, vectors, directory, title, panels))
        written.append(_vector_heatmap(plt, report, vectors, directory, title, panels))
    return written


def _vector_arrays(report: dict, vectors: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """truth, pred [T, D] of the first sequence, the vector keys' dimensions side by side
    (in the order of `vectors`)."""
    def side(prefix):
        return np.concatenate(
            [np.asarray(report[f"{prefix}/{k}"], np.float64)[0].reshape(
                np.shape(report[f"{prefix}/{k}"])[1], -1) for k in vectors], axis=1)
    return side("truth"), side("pred")


def open_loop_error(truth: np.ndarray, pred: np.ndarray, context: int) -> np.ndarray:
    """Mean absolute error per dimension over the imagined rows: truth, pred [T, D] -> [D]
    (all rows when none is imagined). Non-finite predictions count as infinitely wrong."""
    rows = slice(context, None) if truth.shape[0] > context else slice(None)
    err = np.abs(pred[rows] - truth[rows])
    return np.nan_to_num(err, nan=np.inf).mean(axis=0)


def chosen_dims(report: dict, vectors: list[str], panels: int = VECTOR_PANELS
                ) -> list[tuple[str, int, float]]:
    """The vector dimensions drawn as their own panels: (key, index, error) each.

    All of them, in order, when there are at most `panels`; otherwise the `panels` with
    the largest open-loop error (open_loop_error of the first sequence), largest first,
    ties in dimension order."""
    truth, pred = _vector_arrays(report, vectors)
    err = open_loop_error(truth, pred, int(report["context"]))
    names = [(k, d) for k in vectors
             for d in range(int(np.prod(np.shape(report[f"truth/{k}"])[2:])))]
    order = range(len(names)) if len(names) <= panels else np.argsort(
        -err, kind="stable")[:panels]
    return [(*names[i], float(err[i])) for i in order]


def _vector_panels(plt, report: dict, vectors: list[str], directory: Path, title: str,
                   panels: int) -> Path:
    """openl_vector.png: chosen_dims' panels, then reward and continue; truth against
    prediction over time, the observed rows shaded."""
    n = int(report["context"])
    truth_all, pred_all = _vector_arrays(report, vectors)
    offsets = dict(zip(vectors, np.cumsum([0] + [
        int(np.prod(np.shape(report[f"truth/{k}"])[2:])) for k in vectors]), strict=False))
    chosen = chosen_dims(report, vectors, panels)
    ranked = len(chosen) < truth_all.shape[1]
    items = [(f"{k}[{d}]  err {e:.3g}", truth_all[:, offsets[k] + d],
              pred_all[:, offsets[k] + d]) for k, d, e in chosen]
    items += [(k, np.asarray(report[k])[0], np.asarray(report[f"pred_{k}"])[0])
              for k in ("reward", "cont")]
    cols = min(4, len(items))
    rows = -(-len(items) // cols)
    # Margins in inches, set once: matplotlib's constrained layout would measure every
    # tick label of every panel on each draw, most of the picture's cost.
    height = 2.6 * rows + 0.8
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, height), squeeze=False)
    fig.subplots_adjust(left=0.5 / (3.6 * cols), right=1 - 0.15 / (3.6 * cols),
                        bottom=0.35 / height, top=1 - 1.0 / height, wspace=0.28,
                        hspace=0.45)
    try:
        for ax, (label, truth, pred) in zip(axes.flat, items, strict=False):
            t = np.arange(len(truth))
            ax.plot(t, truth, color="black", linewidth=1.2, label="truth")
            ax.plot(t, pred, color="tab:red", linewidth=1.2, linestyle="--",
                    label="prediction")
            ax.axvspan(-0.5, n - 0.5, color="tab:blue", alpha=0.12, linewidth=0)
            ax.set_title(label, fontsize="small")
            ax.grid(alpha=0.3)
        for ax in list(axes.flat)[len(items):]:
            ax.set_visible(False)
        axes.flat[0].legend(fontsize="x-small", loc="best")
        which = (f"the {len(chosen)} of {truth_all.shape[1]} dimensions with the largest "
                 "open-loop error (all in openl_vector_heatmap.png)\n" if ranked else "")
        fig.suptitle(f"{title}open loop: {n} rows observed (shaded), the rest imagined "
                     f"with the actions taken\n{which}", fontsize="medium")
        path = directory / "openl_vector.png"
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def _vector_heatmap(plt, report: dict, vectors: list[str], directory: Path, title: str,
                    panels: int) -> Path:
    """openl_vector_heatmap.png: truth, prediction and error of every vector dimension
    over time as heat maps (dimensions down, time across), and each dimension's open-loop
    error; a fixed size for any number of dimensions."""
    from matplotlib.ticker import MaxNLocator

    n = int(report["context"])
    truth, pred = _vector_arrays(report, vectors)
    err = open_loop_error(truth, pred, n)
    T, D = truth.shape
    finite = truth[np.isfinite(truth)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    fig, axes = plt.subplots(1, 4, figsize=(13, 5.5), sharey=True,
                             gridspec_kw={"width_ratios": [3, 3, 3, 1.2]})
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.09, top=0.84, wspace=0.3)
    try:
        extent = (-0.5, T - 0.5, D - 0.5, -0.5)
        shown = [("truth", truth, "viridis", lo, hi), ("prediction", pred, "viridis", lo, hi),
                 ("error (prediction - truth)", pred - truth, "RdBu_r", -(hi - lo), hi - lo)]
        for ax, (label, data, cmap, vmin, vmax) in zip(axes, shown, strict=False):
            im = ax.imshow(data.T, aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax,
                           extent=extent, interpolation="antialiased")
            ax.axvline(n - 0.5, color="white" if cmap == "viridis" else "black",
                       linewidth=1, linestyle="--")
            ax.set_title(label, fontsize="small")
            ax.set_xlabel("time (rows)")
            fig.colorbar(im, ax=ax, shrink=0.8, pad=0.02)
        axes[0].set_ylabel("dimension")
        ax = axes[3]
        shown_err = np.where(np.isfinite(err), err, np.nanmax(err[np.isfinite(err)],
                                                              initial=0.0))
        ax.stairs(shown_err, np.arange(D + 1) - 0.5, orientation="horizontal", fill=True,
                  color="tab:red")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title("mean |error|,\nimagined rows", fontsize="small")
        ax.set_xlabel("error")
        ax.grid(alpha=0.3)
        start = 0
        for key in vectors:
            if len(vectors) > 1:
                for a in axes:
                    a.axhline(start - 0.5, color="gray", linewidth=0.6)
                axes[0].annotate(key, (0, start), xytext=(2, -2), textcoords="offset points",
                                 fontsize="x-small", color="white", va="top")
            start += int(np.prod(np.shape(report[f"truth/{key}"])[2:]))
        fig.suptitle(f"{title}open loop, all {D} vector dimensions of the first sequence: "
                     f"{n} rows observed (left of the dashed line),\nthe rest imagined with the "
                     f"actions taken; colours clipped to the truth's range [{lo:.3g}, {hi:.3g}]",
                     fontsize="medium")
        path = directory / "openl_vector_heatmap.png"
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path
