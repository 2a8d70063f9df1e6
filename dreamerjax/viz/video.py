"""Episode videos of a trained policy: `dreamerjax eval RUN --video out.mp4` (or .gif).

An evaluation episode (run/rollout.py) comes with its env states and observations,
and each step is drawn: image observations directly (upscaled), gymnax's classic-control
tasks by a small renderer of their state (cart and pole, the two links of Acrobot, the pendulum, the
mountain car's hill), any other vector observation as bars. The return so far is written
in the corner. imageio writes the file with its bundled ffmpeg (no system install).

Host envs (gym_, atari_, dmc_, crafter_) play the episode on an env built for rendering
(run/rollout.py), and each frame is the env's own
picture (`HostEnv.render()`: Gymnasium's render_mode="rgb_array", DMC's camera), else its
image observation, else bars of its vector observation, scaled to SIZE pixels high.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import jax
import numpy as np

SIZE = 256  # frame side in pixels


def picture(env, row) -> np.ndarray:
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
    if "frame" in episode:  # a host env's own pictures (run/rollout.py, host suites)
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
