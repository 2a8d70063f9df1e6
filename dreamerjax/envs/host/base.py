"""Host environments: suites not written in JAX, stepped on the CPU between jitted calls.

A host env (one Python object per env instance) has

    spec             HostSpec: obs space as (name, shape, dtype_str) tuples, discrete n or
                     continuous dims (the agent acts in [-1, 1]^dims)
    reset(seed)      -> obs {name: np.ndarray}
    step(action)     -> obs, reward, terminated, truncated, info
    close()

Observations are a dict of named keys: vectors float32 [D], images uint8 [H, W, C]; rows
carry them under `obs` (the row schema, data/schema.py).
`info["episode_log"]`, the running per-episode extras named by `spec.episode_keys`
(Crafter's achievement counts), is reported in the episode end's `stats`, whichever limit
ends it.

`HostVector` holds N of them (in this process, or one worker process each) and
`HostCollector` turns their steps into the rows of the compiled collector (envs/core.py):

    row 0      reset observation, reward 0, is_first
    row k      observation after step k and the reward of step k   (k = 1 .. L)
    row L      also is_last; is_terminal only on a real termination

A time limit (the env's own truncation or the collector's `time_limit`, the reference's
`wrapper.length`, embodied/core/wrappers.py:10-36) is is_last without is_terminal. The env
is held on its is_last tick: the next step emits the next episode's reset row and ignores
the action it is given (embodied/core/driver.py:34-38, 70-74).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dreamerjax.config import defaults as config_defaults
from dreamerjax.envs.core import ObsSpace
from dreamerjax.envs.registry import SUITES, MissingExtra

HOST_SUITES = tuple(name for name, suite in SUITES.items() if not suite.compiled)
"""The host suites of the registry (envs/registry.py registers them)."""

# The reference's env settings (dreamerv3/configs.yaml:77-84 at 29eb964, `wrapper` and
# `env.<suite>`): the Config's env dataclasses (config/defaults.py) are their one home;
# what the reference's constructors fix and its config does not expose is added here.
# Suite constructors take these names as keyword arguments; a Config's env.<suite> section
# overrides them (envs.suite_options, run/host_loop.py).
SUITE_DEFAULTS: dict[str, dict[str, Any]] = {
    "gym": {},
    "atari": {**dataclasses.asdict(config_defaults.AtariConfig()), "length": 108000,
              "clip_reward": False},
    # atari100k sets no pooling/aggregate: the constructor's 2 / max apply (atari.py:18-21).
    "atari100k": {**dataclasses.asdict(config_defaults.Atari100kConfig()), "pooling": 2,
                  "aggregate": "max", "clip_reward": False},
    "dmc": dataclasses.asdict(config_defaults.DMCConfig()),
    "crafter": dataclasses.asdict(config_defaults.CrafterConfig()),
    "loconav": dataclasses.asdict(config_defaults.LocoNavConfig()),
    "pinpad": {},  # configs.yaml has no env.pinpad: the constructor's length 10000
    "procgen": dataclasses.asdict(config_defaults.ProcgenConfig()),
    "bsuite": {},
    "memmaze": dataclasses.asdict(config_defaults.MemmazeConfig()),
}
WRAPPER_DEFAULTS = dict(length=0)  # configs.yaml:77 `wrapper.length` (0: no extra limit)

@dataclasses.dataclass(frozen=True)
class HostSpec:
    """What the agent needs to know about a host env."""

    env_id: str
    obs_space: ObsSpace
    discrete: bool
    num_actions: int  # classes of a discrete action; 0 when continuous
    action_dims: int  # size of a continuous action vector; 0 when discrete
    episode_limit: int = 0  # the env's own limit in agent steps where known, else 0
    episode_keys: tuple[tuple[str, str], ...] = ()  # (name, dtype) of info["episode_log"]
    # A continuous action's box as the env's space gives it (normalized_action maps onto
    # it): per-dim bounds, their dtype, the env's action shape. A discrete action's first
    # index (Gymnasium's Discrete start).
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    action_bounds_dtype: str = "float32"
    env_action_shape: tuple[int, ...] = ()
    action_start: int = 0

    @property
    def action_shape(self) -> tuple[int, ...]:
        return () if self.discrete else (self.action_dims,)

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.int32 if self.discrete else np.float32)

    def obs_keys(self) -> tuple[str, ...]:
        return tuple(name for name, _, _ in self.obs_space)

    def image_keys(self) -> tuple[str, ...]:
        return tuple(n for n, s, d in self.obs_space if len(s) == 3 and d == "uint8")


class HostEnv:
    """Base class of the suite adapters (gym.py, atari.py, dmc.py, crafter.py)."""

    spec: HostSpec

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def step(self, action) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        raise NotImplementedError

    def render(self) -> np.ndarray | None:
        """An RGB uint8 [H, W, 3] picture of the current step for videos (dreamerjax
        eval --video), or None: the video then shows the image observation."""
        return None

    def close(self) -> None:
        pass


class EnvWorkerError(RuntimeError):
    """A host env raised, or its worker process died or stopped answering."""


def check_obs_space(env_id: str, obs_space: ObsSpace) -> ObsSpace:
    """Refuse spaces the rows cannot carry (duplicate names, other dtypes)."""
    names = [n for n, _, _ in obs_space]
    if len(set(names)) != len(names):
        raise ValueError(f"{env_id}: duplicate observation keys {names}")
    for name, shape, dtype in obs_space:
        image = len(shape) == 3
        if (image and dtype != "uint8") or (not image and (len(shape) != 1
                                                          or dtype != "float32")):
            raise ValueError(f"{env_id}: observation {name!r} {shape} {dtype}: keys are "
                             "float32 vectors [D] or uint8 images [H, W, C]")
    return tuple(obs_space)


def normalized_action(action, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Agent action in [-1, 1]^dims (float32 [D]) -> env bounds `low`, `high` [D].

    Clip to [-1, 1] (ClipAction), then rescale to [low, high] on dims whose bounds are both
    finite and pass the rest through (NormalizeAction), embodied/core/wrappers.py:58-91 as
    applied by dreamerv3/main.py:228-245, in the reference's dtypes, so that the env gets
    the same numbers bit for bit: the action stays float32 (the agent's), so `a + 1` and
    the halving round in float32, and the bounds keep the env space's own dtype (float64
    for dm_control, float32 for most Gymnasium Boxes), which the product and sum then
    promote to. In float64 throughout, the action moves by up to 6e-8 (docs/environments.md).
    """
    a = np.clip(np.asarray(action, np.float32), -1, 1)
    mask = np.isfinite(low) & np.isfinite(high)
    lo, hi = np.where(mask, low, -1), np.where(mask, high, 1)
    return np.where(mask, (a + 1) / 2 * (hi - lo) + lo, a)


def box_fields(low: np.ndarray, high: np.ndarray, shape: tuple[int, ...]) -> dict:
    """The HostSpec fields of a continuous action box: the flat bounds `low`, `high` [D]
    that the adapter's step maps onto (normalized_action), their dtype, the env's shape."""
    return dict(action_low=tuple(float(x) for x in low),
                action_high=tuple(float(x) for x in high),
                action_bounds_dtype=np.result_type(low, high).name,
                env_action_shape=tuple(int(x) for x in shape))


def import_quietly(module: str):
    """Import a suite's package that imports the old `gym`, whose gym_notices prints a
    deprecation notice on stderr at its first import (procgen, memory_maze need `gym`;
    the suites themselves run on numpy 2)."""
    import contextlib
    import importlib
    import io
    with contextlib.redirect_stderr(io.StringIO()):
        return importlib.import_module(module)


def split_env_id(env_id: str) -> tuple[str, str]:
    """`suite_task` split at the first underscore (dreamerv3/main.py:192)."""
    suite, sep, task = env_id.partition("_")
    if not sep or not task:
        raise ValueError(f"env id {env_id!r} is not of the form SUITE_TASK")
    return suite, task


def require_extra(env_id: str) -> None:
    """MissingExtra (one line, with the install command) when a suite's packages are
    missing."""
    suite = SUITES[split_env_id(env_id)[0]]
    missing = suite.missing()
    if missing:
        raise MissingExtra(f"env {env_id!r} needs {', '.join(missing)} (not installed): "
                           f"{suite.install}")


def suite_settings(suite: str, overrides: dict | None = None) -> dict[str, Any]:
    """The reference's defaults for a suite with `overrides` on top (unknown keys refused)."""
    if suite not in SUITE_DEFAULTS:
        raise ValueError(f"unknown host suite {suite!r}; known: {', '.join(HOST_SUITES)}")
    out = dict(SUITE_DEFAULTS[suite])
    for k, v in (overrides or {}).items():
        if k not in out:
            raise ValueError(f"env.{suite}.{k}: unknown setting; known: "
                             f"{', '.join(sorted(out)) or 'none'}")
        out[k] = v
    return out


def make_host_env(env_id: str, **settings) -> HostEnv:
    """Build one host env from its reference-style id (`gym_CartPole-v1`, `atari_pong`,
    `atari100k_pong`, `dmc_walker_walk`, `crafter_reward`) and suite settings."""
    suite, task = split_env_id(env_id)
    if suite not in HOST_SUITES:
        raise ValueError(f"env id {env_id!r}: unknown host suite {suite!r}; known: "
                         f"{', '.join(HOST_SUITES)}")
    require_extra(env_id)
    kw = suite_settings(suite, settings)
    # Each host suite's module (named in the registry, imported on first use) has
    # make(task, env_id=..., **settings).
    return SUITES[suite].load(env_id).make(task, env_id=env_id, **kw)


@dataclasses.dataclass(frozen=True)
class EnvFactory:
    """A picklable constructor of one host env (what a worker process runs)."""

    env_id: str
    settings: tuple[tuple[str, Any], ...] = ()

    def __call__(self) -> HostEnv:
        return make_host_env(self.env_id, **dict(self.settings))


# ----------------------------------------------------------------------------- vector


def _worker(conn, factory) -> None:
    """Serve one env: ("reset", seed) / ("step", action) / ("close", None) -> (ok, value)."""
    try:
        env = factory()
        conn.send(("ok", env.spec))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            cmd, arg = conn.recv()
        except (EOFError, KeyboardInterrupt):
            break
        try:
            if cmd == "close":
                env.close()
                conn.send(("ok", None))
                break
            out = env.reset(arg) if cmd == "reset" else env.step(arg)
            conn.send(("ok", out))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))


def _last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else "unknown error"


class HostVector:
    """N host envs; commands are sent to all, then the results received (so the caller can
    do other work, such as device updates, while worker processes step).

    parallel=False steps the envs one after the other in this process (cheapest for
    envs such as CartPole); parallel=True gives each env a worker process ("spawn", safe
    beside JAX's threads). A worker that raises, dies or does not answer within `timeout`
    seconds raises EnvWorkerError naming the env; the vector is then closed.
    """

    def __init__(self, factories: Sequence[Callable[[], HostEnv]], parallel: bool = False,
                 timeout: float = 300.0):
        if not factories:
            raise ValueError("a host vector needs at least one env")
        self.parallel = bool(parallel)
        self.timeout = float(timeout)
        self._pending: list[tuple[str, Any]] | None = None
        self._closed = False
        if self.parallel:
            ctx = mp.get_context("spawn")
            self._conns, self._procs = [], []
            for f in factories:
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker, args=(child, f), daemon=True)
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
            self._envs = None
            specs = [self._recv(i) for i in range(len(factories))]
        else:
            self._envs = []
            for i, f in enumerate(factories):
                try:
                    self._envs.append(f())
                except Exception as e:
                    self.close()
                    raise EnvWorkerError(f"env {i}: construction raised "
                                         f"{type(e).__name__}: {e}") from e
            specs = [e.spec for e in self._envs]
        if any(s != specs[0] for s in specs[1:]):
            self.close()
            raise ValueError(f"host envs differ in their spaces: {specs[0]} vs "
                             f"{next(s for s in specs if s != specs[0])}")
        self.spec: HostSpec = specs[0]

    def __len__(self) -> int:
        return len(self._envs) if self._envs is not None else len(self._conns)

    def _name(self, i: int) -> str:
        return f"env {i} ({getattr(self, 'spec', None) and self.spec.env_id or 'host env'})"

    def _recv(self, i: int):
        conn, proc = self._conns[i], self._procs[i]
        waited = 0.0
        while not conn.poll(0.05):
            waited += 0.05
            if not proc.is_alive() and not conn.poll():
                self.close()
                raise EnvWorkerError(f"{self._name(i)}: worker process died (exit code "
                                     f"{proc.exitcode})")
            if self.timeout and waited > self.timeout:
                self.close()
                raise EnvWorkerError(f"{self._name(i)}: no answer from its worker within "
                                     f"{self.timeout:g} s")
        try:
            status, value = conn.recv()
        except (EOFError, OSError) as e:
            self.close()
            raise EnvWorkerError(f"{self._name(i)}: worker process died (exit code "
                                 f"{proc.exitcode})") from e
        if status == "error":
            self.close()
            raise EnvWorkerError(f"{self._name(i)} raised {_last_line(value)}\n{value}")
        return value

    def send(self, cmds: Sequence[tuple[str, Any]]) -> None:
        """Start one command per env: ("reset", seed) or ("step", action)."""
        if self._closed:
            raise EnvWorkerError("the host vector is closed (an env failed earlier)")
        if len(cmds) != len(self):
            raise ValueError(f"{len(cmds)} commands for {len(self)} envs")
        if self._pending is not None:
            raise RuntimeError("send() called twice without recv()")
        if self.parallel:
            for i, cmd in enumerate(cmds):
                try:
                    self._conns[i].send(cmd)
                except (BrokenPipeError, OSError) as e:
                    self.close()
                    raise EnvWorkerError(f"{self._name(i)}: worker process died (exit "
                                         f"code {self._procs[i].exitcode})") from e
        self._pending = list(cmds)

    def recv(self) -> list:
        cmds, self._pending = self._pending, None
        if cmds is None:
            raise RuntimeError("recv() without send()")
        if self.parallel:
            return [self._recv(i) for i in range(len(cmds))]
        out = []
        for i, (cmd, arg) in enumerate(cmds):
            env = self._envs[i]
            try:
                out.append(env.reset(arg) if cmd == "reset" else env.step(arg))
            except Exception as e:
                self.close()
                raise EnvWorkerError(f"{self._name(i)} raised {type(e).__name__}: {e}") from e
        return out

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._envs is not None:
            for env in self._envs:
                try:
                    env.close()
                except Exception:  # noqa: BLE001, S110 - closing is best effort
                    pass
            return
        for conn, proc in zip(self._conns, self._procs, strict=True):
            try:
                if proc.is_alive():
                    conn.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for conn, proc in zip(self._conns, self._procs, strict=True):
            proc.join(timeout=2.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2.0)
            conn.close()

    def __enter__(self) -> HostVector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----------------------------------------------------------------------------- collector


@dataclasses.dataclass
class HostEpisodeEnds:
    """Per env of one collector step; meaningful where `ended` (the row is is_last)."""

    ended: np.ndarray  # bool [N]
    length: np.ndarray  # int32 [N]: agent steps L of the finished episode
    score: np.ndarray  # float32 [N]: sum of its step rewards
    terminal: np.ndarray  # bool [N]: real termination (False for a time-limit end)
    stats: dict[str, np.ndarray]  # spec.episode_keys -> [N], read where ended


def empty_rows(spec: HostSpec, n: int) -> dict[str, np.ndarray]:
    rows = {"obs": {name: np.zeros((n, *shape), dtype)
                    for name, shape, dtype in spec.obs_space},
            "reward": np.zeros((n,), np.float32)}
    for k in ("is_first", "is_last", "is_terminal"):
        rows[k] = np.zeros((n,), bool)
    return rows


class HostCollector:
    """The compiled collector's rows (envs/core.py) for N host envs, as batched numpy dicts
    {obs: {name: [N, ...]}, reward [N] f32, is_first / is_last / is_terminal [N] bool}.

    time_limit > 0 ends an episode after that many agent steps as a truncation (the
    reference's TimeLimit wrapper, wrappers.py:10-36), on top of the env's own limit.
    """

    def __init__(self, vector: HostVector, time_limit: int = 0):
        if time_limit < 0:
            raise ValueError(f"time_limit must be >= 0, got {time_limit}")
        self.vector = vector
        self.spec = vector.spec
        self.time_limit = int(time_limit)
        n = len(vector)
        self.is_last = np.zeros((n,), bool)
        self.length = np.zeros((n,), np.int32)
        self.score = np.zeros((n,), np.float64)
        self._resetting: np.ndarray | None = None

    @property
    def num_envs(self) -> int:
        return len(self.vector)

    def reset(self, seeds: Sequence[int | None]) -> dict[str, np.ndarray]:
        """Reset every env (its first episode seeded by `seeds`); returns the reset rows."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        self.vector.send([("reset", None if s is None else int(s)) for s in seeds])
        obs = self.vector.recv()
        self.is_last[:] = False
        self.length[:] = 0
        self.score[:] = 0.0
        rows = empty_rows(self.spec, self.num_envs)
        for i, o in enumerate(obs):
            self._put_obs(rows, i, o)
        rows["is_first"][:] = True
        return rows

    def step_async(self, actions) -> None:
        """Start the next step: held (is_last) envs reset, the others take their action."""
        actions = np.asarray(actions)
        cmds = []
        for i in range(self.num_envs):
            if self.is_last[i]:
                cmds.append(("reset", None))
            elif self.spec.discrete:
                cmds.append(("step", int(actions[i])))
            else:
                cmds.append(("step", np.asarray(actions[i], np.float32)))
        self._resetting = self.is_last.copy()
        self.vector.send(cmds)

    def step_wait(self) -> tuple[dict[str, np.ndarray], HostEpisodeEnds]:
        outs = self.vector.recv()
        resetting, self._resetting = self._resetting, None
        n = self.num_envs
        rows = empty_rows(self.spec, n)
        ended = np.zeros((n,), bool)
        terminal = np.zeros((n,), bool)
        stats = {k: np.zeros((n,), dtype) for k, dtype in self.spec.episode_keys}
        for i, out in enumerate(outs):
            if resetting[i]:
                self._put_obs(rows, i, out)
                rows["is_first"][i] = True
                self.length[i] = 0
                self.score[i] = 0.0
                self.is_last[i] = False
                continue
            obs, reward, term, trunc, info = out
            self._put_obs(rows, i, obs)
            self.length[i] += 1
            self.score[i] += float(reward)
            trunc = bool(trunc) or (self.time_limit > 0 and self.length[i] >= self.time_limit)
            term = bool(term)
            rows["reward"][i] = reward
            rows["is_last"][i] = term or trunc
            rows["is_terminal"][i] = term
            if term or trunc:
                ended[i], terminal[i] = True, term
                log = (info or {}).get("episode_log", {})
                for k in stats:
                    stats[k][i] = log[k]
        self.is_last = rows["is_last"].copy()
        ends = HostEpisodeEnds(ended=ended, length=self.length.copy(),
                               score=self.score.astype(np.float32), terminal=terminal,
                               stats=stats)
        return rows, ends

    def step(self, actions) -> tuple[dict[str, np.ndarray], HostEpisodeEnds]:
        self.step_async(actions)
        return self.step_wait()

    def _put_obs(self, rows: dict, i: int, obs: dict) -> None:
        for name, shape, _ in self.spec.obs_space:
            value = np.asarray(obs[name])
            if value.shape != shape:
                raise EnvWorkerError(f"env {i} ({self.spec.env_id}): observation {name!r} "
                                     f"has shape {value.shape}, its space says {shape}")
            rows["obs"][name][i] = value

    def close(self) -> None:
        self.vector.close()
