"""Episode videos of a trained policy: `dreamerjax eval RUN --video out.mp4` (or .gif).

An evaluation episode is rolled out on device (the same acting step as training and
evaluation), its env states and observations come back to the host, and each step is
drawn: image observations directly (upscaled), gymnax's classic-control tasks by a small
renderer of their state (cart and pole, the two links of Acrobot, the pendulum, the
mountain car's hill), any other vector observation as bars. The return so far is written
in the corner. imageio writes the file with its bundled ffmpeg (no system install).

Host envs (gym_, atari_, dmc_, crafter_; host_rollout) play the episode on an env built for
rendering, with the evaluation policy step of host_driver: each frame is the env's own
picture (`HostEnv.render()`: Gymnasium's render_mode="rgb_array", DMC's camera), else its
image observation, else bars of its vector observation, scaled to SIZE pixels high.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SIZE = 256  # frame side in pixels


def rollout(setup, params, key, mode: bool = False) -> dict:
    """One evaluation episode (up to the episode limit) with its per-step env states.

    Returns host arrays over steps [L + 1]: obs (the agent's dict), reward, done (the step
    ended the episode or came after its end), env_state (the collector's env states)."""
    from dreamerjax import envs as envs_lib
    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.run import host_trainer as host_driver
    from dreamerjax.run import loop as train_lib
    if host_driver.is_host_setup(setup):
        return host_rollout(setup, params, key, mode)
    cfg = setup.config.agent

    @jax.jit
    def run(params, key):
        k_init, k_run = jax.random.split(key)
        env, row = jax.vmap(lambda k: envs_lib.collector_init(setup.spec, k))(
            k_init[None])
        carry = agent_lib.policy_initial(cfg, setup.spaces, 1)

        def step(c, k):
            env, row, carry, done = c
            k_pol, k_env = jax.random.split(k)
            _, carry, env2, row2, _ = train_lib.act_and_step(
                setup, params, carry, row, env, k_pol, k_env, mode)
            out = {"obs": row2["obs"], "reward": row2["reward"], "done": done,
                   "env_state": env2.env_state}
            return (env2, row2, carry, done | row2["is_last"]), out

        first = {"obs": row["obs"], "reward": row["reward"], "done": jnp.zeros((1,), bool),
                 "env_state": env.env_state}
        _, outs = jax.lax.scan(step, (env, row, carry, jnp.zeros((1,), bool)),
                               jax.random.split(k_run, setup.spec.episode_limit))
        return jax.tree.map(lambda a, b: jnp.concatenate([a[None], b], 0), first, outs)

    host = jax.tree.map(lambda x: np.asarray(x)[:, 0], run(params, key))
    return host


def render_env(config):
    """One host env of the run, built to render: Gymnasium envs with render_mode
    "rgb_array" where the env offers it; the other suites as training builds them."""
    from dreamerjax.envs.host import base as host_lib
    from dreamerjax.run import host_trainer as host_driver
    suite, task = host_lib.split_env_id(config.run.env)
    if suite == "gym":
        import gymnasium

        from dreamerjax.envs.host.gym import GymEnv
        host_lib.require_extra(config.run.env)
        try:
            return GymEnv(task, env_id=config.run.env, render_mode="rgb_array")
        except (TypeError, ValueError, gymnasium.error.Error):
            pass  # an env without render_mode: its observations are drawn instead
    return host_driver.env_factory(config)()


def host_rollout(setup, params, key, mode: bool = False) -> dict:
    """One evaluation episode of a host env (up to the episode limit), with a picture of
    every step. Returns host arrays over steps [L + 1] (the reset row first): frame (RGB
    uint8 [H, W, 3]), obs, reward, done (all False: the rollout stops at is_last)."""
    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.envs.host import base as host_lib
    from dreamerjax.run import host_trainer as host_driver

    env = render_env(setup.config)
    col = host_lib.HostCollector(host_lib.HostVector([lambda: env]),
                                 time_limit=setup.run.episode_limit)
    try:
        step = jax.jit(lambda p, c, r, k: host_driver.eval_act(setup, p, c, r, k, mode))
        carry = agent_lib.policy_initial(setup.config.agent, setup.spaces, 1)
        key = np.asarray(key)
        row = col.reset([host_driver._env_seed(*key.ravel().tolist())])
        keys = jax.random.split(jax.random.split(key)[1], host_driver.episode_limit(setup))
        steps = [(row, _picture(env, row))]
        for k in keys:
            act, carry = step(params, carry, row, k)
            row, _ = col.step(np.asarray(act))
            steps.append((row, _picture(env, row)))
            if row["is_last"][0]:
                break
    finally:
        col.close()
    rows = [r for r, _ in steps]
    return {"frame": np.stack([f for _, f in steps]),
            "obs": {n: np.stack([r["obs"][n][0] for r in rows]) for n in rows[0]["obs"]},
            "reward": np.array([r["reward"][0] for r in rows], np.float32),
            "done": np.zeros((len(rows),), bool)}


def _picture(env, row) -> np.ndarray:
    """RGB uint8 [H, W, 3] of a host env's current step."""
    frame = env.render()
    if frame is None:
        obs = {n: v[0] for n, v in row["obs"].items()}
        return np.asarray(draw_state("", None, obs).convert("RGB"))  # image or bars
    frame = np.asarray(frame)
    if frame.ndim == 2:
        frame = frame[..., None]
    return np.repeat(frame, 3, -1) if frame.shape[-1] == 1 else frame[..., :3]


def fit(frame: np.ndarray) -> np.ndarray:
    """A frame scaled to SIZE pixels high, its width in proportion rounded to a multiple of
    16 (what H.264 wants); nearest-neighbour when enlarging, so pixels stay sharp."""
    from PIL import Image
    h, w = frame.shape[:2]
    width = max(16, int(round(w * SIZE / h / 16)) * 16)
    img = Image.fromarray(np.ascontiguousarray(frame, np.uint8))
    resample = Image.NEAREST if h <= SIZE else Image.BILINEAR
    return np.asarray(img.resize((width, SIZE), resample))


def _canvas():
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (SIZE, SIZE), (245, 245, 245))
    return img, ImageDraw.Draw(img)


def _field(state, *names):
    for n in names:
        if hasattr(state, n):
            return float(np.asarray(getattr(state, n)))
    return None


def draw_state(env_id: str, state, obs: dict):
    """A PIL image of one step: the env's own picture where we know its state, else the
    image observation, else bars of the vector observation."""
    from PIL import Image

    images = {k: v for k, v in obs.items() if np.asarray(v).ndim == 3}
    name = env_id.split("_", 1)[-1] if "_" in env_id else env_id
    img, d = _canvas()
    c = SIZE / 2
    if name.startswith("CartPole"):
        x, theta = _field(state, "x"), _field(state, "theta")
        cx = c + x / 2.4 * (SIZE * 0.4)
        d.line([(0, c + 20), (SIZE, c + 20)], fill=(120, 120, 120), width=2)
        d.rectangle([cx - 22, c + 5, cx + 22, c + 30], fill=(60, 60, 60))
        length = SIZE * 0.35
        d.line([(cx, c + 5), (cx + length * math.sin(theta), c + 5 - length * math.cos(theta))],
               fill=(200, 120, 40), width=8)
    elif name.startswith("Acrobot"):
        t1, t2 = _field(state, "joint_angle1"), _field(state, "joint_angle2")
        length = SIZE * 0.22
        p1 = (c + length * math.sin(t1), c + length * math.cos(t1))
        p2 = (p1[0] + length * math.sin(t1 + t2), p1[1] + length * math.cos(t1 + t2))
        d.line([(0, c - 2 * length), (SIZE, c - 2 * length)], fill=(150, 150, 150), width=1)
        d.line([(c, c), p1], fill=(40, 80, 200), width=8)
        d.line([p1, p2], fill=(40, 160, 200), width=8)
    elif name.startswith("Pendulum"):
        theta = _field(state, "theta")
        length = SIZE * 0.35
        d.line([(c, c), (c + length * math.sin(theta), c - length * math.cos(theta))],
               fill=(200, 60, 60), width=10)
        d.ellipse([c - 6, c - 6, c + 6, c + 6], fill=(30, 30, 30))
    elif name.startswith("MountainCar"):
        pos = _field(state, "position")
        xs = np.linspace(-1.2, 0.6, 100)
        pts = [((x + 1.2) / 1.8 * SIZE, SIZE * 0.8 - math.sin(3 * x) * SIZE * 0.25) for x in xs]
        d.line(pts, fill=(90, 90, 90), width=3)
        px, py = (pos + 1.2) / 1.8 * SIZE, SIZE * 0.8 - math.sin(3 * pos) * SIZE * 0.25
        d.ellipse([px - 8, py - 16, px + 8, py], fill=(200, 60, 60))
    elif images:
        frame = np.asarray(next(iter(images.values())))
        if frame.shape[-1] not in (1, 3):  # MinAtar's object channels: a colour each
            frame = frame.astype(np.float32) / (255.0 if frame.dtype == np.uint8 else 1.0)
            chans = frame.shape[-1]
            colors = (np.array([[(37 * k) % 255, (91 * k) % 255, (157 * k) % 255]
                                for k in range(1, chans + 1)], np.float32))
            frame = np.clip(frame.astype(np.float32) @ colors, 0, 255).astype(np.uint8)
        elif frame.shape[-1] == 1:
            frame = np.repeat(frame, 3, -1)
        img = Image.fromarray(frame[..., :3]).resize((SIZE, SIZE), Image.NEAREST)
    else:
        vec = np.concatenate([np.ravel(np.asarray(v, np.float32)) for v in obs.values()])
        width = SIZE / max(len(vec), 1)
        for i, v in enumerate(np.tanh(vec)):
            top, bottom = (c - v * c * 0.8, c) if v >= 0 else (c, c - v * c * 0.8)
            d.rectangle([i * width + 2, top, (i + 1) * width - 2, bottom], fill=(70, 110, 180))
    return img


def frames(env_id: str, episode: dict) -> list[np.ndarray]:
    """RGB uint8 frames [SIZE, SIZE, 3] of a rollout, with the return in the corner."""
    from PIL import ImageDraw

    out, ret = [], 0.0
    steps = len(episode["reward"])
    if "frame" in episode:  # a host env's own pictures (host_rollout)
        from PIL import Image
        for t in range(steps):
            ret += float(episode["reward"][t])
            img = Image.fromarray(fit(episode["frame"][t]))
            d = ImageDraw.Draw(img)
            text = f"return {ret:.1f}  step {t}"
            d.rectangle(d.textbbox((6, 4), text), fill=(255, 255, 255))
            d.text((6, 4), text, fill=(0, 0, 0))
            out.append(np.asarray(img))
        return out
    for t in range(steps):
        if t > 0 and episode["done"][t]:
            break
        ret += float(episode["reward"][t])
        state = jax.tree.map(lambda x, t=t: x[t], episode["env_state"])
        obs = {k: v[t] for k, v in episode["obs"].items()}
        img = draw_state(env_id, state, obs).convert("RGB")
        ImageDraw.Draw(img).text((6, 4), f"return {ret:.1f}  step {t}", fill=(0, 0, 0))
        out.append(np.asarray(img))
    return out


def write_video(path: str | os.PathLike, images: list[np.ndarray], fps: int = 30) -> Path:
    """An .mp4 (imageio's bundled ffmpeg) or .gif of the frames."""
    import imageio.v3 as iio

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gif":
        iio.imwrite(path, images, duration=1000 / fps, loop=0)
    elif path.suffix.lower() == ".mp4":
        iio.imwrite(path, np.stack(images), fps=fps, codec="libx264", plugin="pyav") \
            if _has_pyav() else _write_mp4_ffmpeg(path, images, fps)
    else:
        raise ValueError(f"--video {path}: use a .mp4 or .gif file name")
    return path


def _has_pyav() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _write_mp4_ffmpeg(path: Path, images: list[np.ndarray], fps: int) -> None:
    """H.264 by imageio-ffmpeg's bundled ffmpeg binary, started here rather than through
    imageio's writer: that one passes preexec_fn=os.setpgrp to subprocess (to keep Ctrl-C
    from ffmpeg), and a preexec_fn makes Python run code in the forked child, so the fork
    handlers run and JAX's warns that os.fork() under its threads may deadlock. Without
    one, nothing of Python runs between fork and exec: no handler, no such risk. Frames
    [H, W] or [H, W, C] uint8; odd sizes are padded to even ones (yuv420p needs them)."""
    import subprocess

    import imageio_ffmpeg

    frames = np.stack([_rgb(f) for f in images])
    height, width = frames.shape[1:3]
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error",
           "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{width}x{height}",
           "-r", str(fps), "-i", "-", "-an", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
           "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)]
    done = subprocess.run(cmd, input=frames.tobytes(), capture_output=True, check=False)
    if done.returncode:
        raise RuntimeError(f"ffmpeg could not write {path}: "
                           f"{done.stderr.decode(errors='replace').strip()[-500:]}")


def _rgb(frame: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] of a grey [H, W] / [H, W, 1] or RGBA frame."""
    frame = np.asarray(frame, np.uint8)
    if frame.ndim == 2:
        frame = frame[..., None]
    if frame.shape[-1] == 1:
        frame = np.repeat(frame, 3, -1)
    return np.ascontiguousarray(frame[..., :3])
