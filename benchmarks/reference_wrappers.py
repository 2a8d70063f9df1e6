"""The host suites against the reference's own env wrappers, row by row.

    python benchmarks/reference_wrappers.py --reference DIR [--reference-python PY]
        [--cases a,b] [--out results/host_envs/reference_wrappers.json]
        [--fixtures tests/data/host_envs]

DIR is an extracted checkout of danijar/dreamerv3 at 29eb964 (`git archive 29eb964 | tar
-x -C DIR`), imported unmodified: its `embodied` package and dreamerv3/main.py (loaded
from its file, for `make_env` / `wrap_env`; the package's __init__ would import the
agent). Each case replays one seeded action sequence (several hundred rows with resets
and time limits) through the reference's wrappers, built from its configs.yaml with the
case's presets and keys, and through ours (`make_host_env` with the same presets resolved
by our config, `HostCollector` with `wrapper.length`), and prints per case and key the
rows that differ, the first one and the largest difference, each labelled with the
documented deviation that explains it (docs/deviations.md) or "undocumented".

The reference side runs in a second interpreter (`--reference-python`, default this one)
so that it can have the numpy of its time (1.26: a Python float plus a numpy float32
scalar is float64 there, float32 in numpy 2, NEP 50). Jax is hidden from it (the
reference's `embodied/__init__.py` imports jax only for tracebacks).

What the harness supplies, changing nothing the wrappers compute:
- Atari: ALE_ROM_PATH points at ale-py's ROMs (atari.py:52-57 reads ALE_ROM_PATH first;
  its other branch names an ale-py 0.8 module); `ale_py.ALEInterface` takes the setting
  name as bytes again (atari.py:51 passes b'random_seed', which ale-py 0.9+ refuses;
  `BytesKeys`), so both sides run the same ALE; the seed goes through make_env's
  overrides to `Atari(seed=)` (atari.py:46), as `use_seed` would.
- DMC: the dm_control env is loaded with `task_kwargs={"random": seed}` and handed to
  `DMC(env, camera=...)`, the camera the string form would pick (dmc.py:21-22), since
  the reference's `DMC("walker_walk")` draws an unseeded task.
- Gymnasium: the reference's FromGym speaks the old gym API (reset -> obs, step -> four
  values, info["is_terminal"]; from_gym.py:56-69); `OldGymApi` presents a Gymnasium env
  that way (done = terminated or truncated, is_terminal = terminated) and seeds its first
  reset, and `gym` is Gymnasium for from_gym.py's `gym.spaces.Dict`.
- PinPad: its RandomState is made unseeded (pinpad.py:33); the harness replaces it with
  `RandomState(seed)` before the first reset, as our `reset(seed)` does.
- LocoNav: it builds its labmaze maze and its composer environment with random_state
  None (loconav.py:52, 113); the harness passes the seed to both constructors
  (the maze gets `RandomState(seed)`, the environment the seed), as our `reset(seed)`
  does. Its per-step `log_coverage` is compared on the rows that end an episode, where
  ours reports the episode's count.
- ProcGen and Memory Maze run through the old `gym` (0.26.2, what procgen-mirror
  installs), whose env checker names `np.bool8` on the first step; under numpy 2, which
  removed that alias, the harness restores it (`np.bool8 = np.bool_`).
- ProcGen: the seed goes through make_env's overrides to gym.make as procgen's
  `rand_seed` (procgen.py:19-21 passes env kwargs on); the reference leaves it unset.
- BSuite: bsuite's sweep leaves catch's and cartpole's `seed` None, so the reference's
  `load_from_id` draws unseeded episodes; the harness puts the seed into the sweep's
  settings of the id (`seeded_bsuite`), which `load_from_id` then reads, as ours builds
  the id's settings with the seed.
- Memory Maze: the seed goes through make_env's overrides to gym.make and on to
  memory_maze's task (`seed`, which draws the layouts and targets).
- Crafter: its World keeps each chunk's objects in a set, hashed by memory address
  (crafter/engine.py:36, 57), and its balancing picks "a random one of the list built
  from that set" (crafter/env.py:157-175), so the same seed and actions give different
  worlds from run to run (danijar/crafter issues 31 and 36). `deterministic_crafter()`
  gives every object a hash from its world's creation count: the sets then iterate in
  the same order in every process. The random draws, the objects and the rules are
  Crafter's; only which equally valid set order is used is fixed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# case -> env id, the reference's presets (configs.yaml), keys set on top of them (the
# same dotted keys on both sides), the rows to replay, the env seed, the action seed.
CASES: dict[str, dict] = {
    "atari100k_pong": dict(env="atari100k_pong", configs=["atari100k"],
                           sets={"env.atari100k.length": 800}, rows=301),
    "atari_pong": dict(env="atari_pong", configs=["atari"], sets={"wrapper.length": 120},
                       rows=301),
    "atari_pong_sticky_off": dict(env="atari_pong", configs=["atari"],
                                  sets={"env.atari.sticky": False, "wrapper.length": 150},
                                  rows=301),
    "dmc_walker_walk": dict(env="dmc_walker_walk", configs=["dmc_proprio"],
                            sets={"wrapper.length": 200}, rows=520),
    "dmc_cartpole_swingup": dict(env="dmc_cartpole_swingup", configs=["dmc_vision"],
                                 sets={"wrapper.length": 150}, rows=320),
    "crafter_reward": dict(env="crafter_reward", configs=["crafter"],
                           sets={"wrapper.length": 250}, rows=520),
    "gym_Pendulum-v1": dict(env="gym_Pendulum-v1", configs=[], sets={}, rows=450),
    "gym_CartPole-v1": dict(env="gym_CartPole-v1", configs=[], sets={}, rows=400),
    # PinPad's actions walk to the pads in order (pinpad_actions), so that sequences are
    # completed, rewarded and counted down within the rows.
    "pinpad_three": dict(env="pinpad_three", configs=[], sets={"wrapper.length": 200},
                         rows=520, policy="pinpad"),
    "pinpad_eight": dict(env="pinpad_eight", configs=[], sets={"wrapper.length": 300},
                         rows=520, policy="pinpad"),
    "loconav_ant_maze_m": dict(env="loconav_ant_maze_m", configs=["loconav"],
                               sets={"wrapper.length": 120}, rows=260,
                               log_keys=("log_coverage",)),
    # procgen's own 64 x 64 frames (the `step` source), then the preset's 96 x 96 renders
    # (the `info` source); bossfight's episodes end within the rows.
    "procgen_bossfight": dict(env="procgen_bossfight", configs=[], sets={}, rows=300),
    "procgen_bossfight_96": dict(env="procgen_bossfight", configs=["procgen"], sets={},
                                 rows=200),
    "bsuite_catch": dict(env="bsuite_catch/0", configs=["bsuite"], sets={}, rows=300),
    "bsuite_cartpole": dict(env="bsuite_cartpole/0", configs=["bsuite"], sets={}, rows=300),
    # The maze's own limit (1,000 steps) is beyond a default-tier replay: wrapper.length
    # ends its episodes; memmaze_9x9_limit reaches it (D30's row).
    "memmaze_9x9": dict(env="memmaze_9x9", configs=["memmaze"], sets={"wrapper.length": 30},
                        rows=70),
    "memmaze_9x9_limit": dict(env="memmaze_9x9", configs=["memmaze"], sets={}, rows=1010),
}
ENV_SEED = 0
ACTION_SEED = 1
ROW_KEYS = ("reward", "is_first", "is_last", "is_terminal")
LOG_KEYS = "_log_keys"  # the reference's log_ key names (not rows; suites' episode stats)


def actions_for(case: str, discrete: bool, n: int) -> np.ndarray:
    """The case's action per row [rows] int32 or [rows, n] float32 (in [-1.2, 1.2]: the
    clip is part of what is compared)."""
    rows = CASES[case]["rows"]
    rng = np.random.default_rng([ACTION_SEED, sum(map(ord, case))])
    if discrete:
        return rng.integers(0, n, rows).astype(np.int32)
    return rng.uniform(-1.2, 1.2, (rows, n)).astype(np.float32)


# ----------------------------------------------------------------------------- both sides


def deterministic_crafter() -> None:
    """Hash Crafter's objects by their world's creation count (module docstring)."""
    from crafter import objects
    if getattr(objects.Object, "_creation_hash", False):
        return
    init = objects.Object.__init__

    def counted_init(self, world, pos):
        init(self, world, pos)
        self._created = getattr(world, "_objects_created", 0)
        world._objects_created = self._created + 1

    objects.Object.__init__ = counted_init
    objects.Object.__hash__ = lambda self: self._created
    objects.Object._creation_hash = True


def seeded_loconav() -> None:
    """LocoNav's maze and composer environment built with ENV_SEED (module docstring)."""
    import labmaze
    from dm_control import composer
    maze_init, env_init = labmaze.FixedMazeWithRandomGoals.__init__, composer.Environment.__init__

    def maze(self, *args, **kw):
        maze_init(self, *args, **{**kw, "random_state": np.random.RandomState(ENV_SEED)})

    def environment(self, *args, **kw):
        env_init(self, *args, **{**kw, "random_state": ENV_SEED})

    labmaze.FixedMazeWithRandomGoals.__init__ = maze
    composer.Environment.__init__ = environment


def _pinpad_move(grid: np.ndarray, player: tuple[int, int], pad: int) -> tuple[int, int]:
    """The first (dx, dy) of a shortest walk from `player` (x, y) to pad `pad` over the
    floor (other pads avoided, so that the sequence is not broken on the way)."""
    start = (player[1], player[0])
    first = {start: (0, 0)}
    frontier = [start]
    while frontier:
        nxt = []
        for r, c in frontier:
            if grid[r, c] == pad:
                return first[(r, c)]
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                cell = (r + dy, c + dx)
                if cell not in first and grid[cell] in (0, pad):
                    first[cell] = first[(r, c)] if (r, c) != start else (dx, dy)
                    nxt.append(cell)
        frontier = nxt
    return (0, 0)


def pinpad_actions(case_name: str) -> np.ndarray:
    """Actions [rows] int32 that walk to PinPad's next pad (the pad that extends the
    sequence towards 1, 2, ..., N, over the floor), one in six drawn at random; chosen
    while our env plays them (the reference replays the same list)."""
    from dreamerjax.envs.host import base as host
    from dreamerjax.envs.host.pinpad import MOVES
    case = CASES[case_name]
    rng = np.random.default_rng([ACTION_SEED, sum(map(ord, case_name))])
    env = host.make_host_env(case["env"])
    col = host.HostCollector(host.HostVector([lambda: env]),
                             case["sets"].get("wrapper.length", 0))
    col.reset([ENV_SEED])
    actions = [0]
    for _ in range(case["rows"] - 1):
        seq, target = env.sequence, env.target
        k = max((n for n in range(len(seq) + 1) if tuple(seq[len(seq) - n:]) ==
                 target[:n]), default=0)
        move = _pinpad_move(env.grid, env.player, target[k % len(target)])
        a = MOVES.index(move) if rng.random() > 1 / 6 else int(rng.integers(len(MOVES)))
        actions.append(a)
        col.step(np.array([a]))
    col.close()
    return np.array(actions, np.int32)


def image_digest(image: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()[:16]


# ----------------------------------------------------------------------------- reference


class OldGymApi:
    """A Gymnasium env as the old gym API that from_gym.py calls (module docstring)."""

    def __init__(self, env, seed: int):
        self._env, self._seed = env, seed
        self.observation_space, self.action_space = env.observation_space, env.action_space

    def reset(self):
        obs, _ = self._env.reset(seed=self._seed)
        self._seed = None
        return obs

    def step(self, action):
        obs, reward, terminated, truncated, info = self._env.step(action)
        return obs, reward, terminated or truncated, {**info, "is_terminal": terminated}

    def close(self):
        self._env.close()


def bytes_keys_ale() -> None:
    """ale_py.ALEInterface accepting setting names as bytes (module docstring)."""
    import ale_py
    if getattr(ale_py.ALEInterface, "_bytes_keys", False):
        return

    class BytesKeys(ale_py.ALEInterface):
        _bytes_keys = True

        def setInt(self, key, value):  # noqa: N802 - ALE's name
            super().setInt(key.decode() if isinstance(key, bytes) else key, int(value))

    ale_py.ALEInterface = BytesKeys


def seeded_bsuite(bsuite_id: str) -> None:
    """bsuite's sweep settings of `bsuite_id` with ENV_SEED where they leave `seed` None
    (module docstring)."""
    import numpy
    if not hasattr(numpy, "int"):
        numpy.int = int  # as the reference's bsuite.py:13 before importing bsuite
    from bsuite import sweep
    settings = dict(sweep.SETTINGS[bsuite_id])
    if "seed" in settings and settings["seed"] is None:
        settings["seed"] = ENV_SEED
    sweep.SETTINGS = {**sweep.SETTINGS, bsuite_id: settings}


def _reference_config(embodied, reference: Path, case: dict):
    from ruamel.yaml import YAML
    configs = YAML(typ="safe").load((reference / "dreamerv3" / "configs.yaml").read_text())
    config = embodied.Config(configs["defaults"])
    for name in case["configs"]:
        config = config.update(configs[name])
    return config.update({"task": case["env"], **case["sets"]})


def _reference_env(reference: Path, case: dict):
    sys.modules["jax"] = None  # embodied/__init__.py: tracebacks only (module docstring)
    sys.path.insert(0, str(reference))
    import importlib.util

    import embodied
    spec = importlib.util.spec_from_file_location(
        "reference_main", reference / "dreamerv3" / "main.py")
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    config = _reference_config(embodied, reference, case)
    suite, task = case["env"].split("_", 1)
    if suite == "pinpad":
        from embodied.envs import pinpad
        env = pinpad.PinPad(task, **config.env.get("pinpad", {}))
        env.random = np.random.RandomState(ENV_SEED)
        return main.wrap_env(env, config)
    if suite == "loconav":
        seeded_loconav()
        return main.make_env(config, 0)
    if suite == "dmc":
        from dm_control import suite as dm_suite
        from embodied.envs import dmc
        domain, name = task.split("_", 1)
        raw = dm_suite.load({"cup": "ball_in_cup"}.get(domain, domain), name,
                            task_kwargs={"random": ENV_SEED})
        kw = dict(config.env.dmc)
        if kw["camera"] == -1:
            kw["camera"] = dmc.DMC.DEFAULT_CAMERAS.get(domain, 0)
        return main.wrap_env(dmc.DMC(raw, **kw), config)
    if suite == "gym":
        import gymnasium
        sys.modules["gym"] = gymnasium
        from embodied.envs import from_gym
        env = from_gym.FromGym(OldGymApi(gymnasium.make(task), ENV_SEED))
        return main.wrap_env(env, config)
    if suite in ("procgen", "memmaze") and not hasattr(np, "bool8"):
        np.bool8 = np.bool_  # gym 0.26's env checker under numpy 2 (module docstring)
    if suite == "procgen":
        return main.make_env(config, 0, rand_seed=ENV_SEED)
    if suite == "bsuite":
        seeded_bsuite(task if "/" in task else f"{task}/0")
        return main.make_env(config, 0)
    if suite == "crafter":
        deterministic_crafter()
    if suite.startswith("atari"):
        bytes_keys_ale()
    return main.make_env(config, 0, seed=ENV_SEED)


def record_reference(reference: Path, case_name: str, actions: np.ndarray) -> dict:
    """The reference's rows {key: [rows, ...]} for the case's actions; the names of the
    `log_` keys it emitted (which are not rows here) under LOG_KEYS."""
    if CASES[case_name]["env"].startswith("atari"):
        import ale_py
        os.environ.setdefault("ALE_ROM_PATH", str(Path(ale_py.__file__).parent / "roms"))
    os.environ.setdefault("MUJOCO_GL", "egl")
    env = _reference_env(reference, CASES[case_name])
    rows: dict[str, list] = {}
    log_keys = CASES[case_name].get("log_keys", ())  # compared as rows (episode stats)
    logs: set[str] = set()
    for k, a in enumerate(actions):
        obs = env.step({"action": a, "reset": k == 0})
        for key, value in obs.items():
            if key.startswith("log_"):
                logs.add(key)
            if key.startswith("log_") and key not in log_keys:
                continue
            rows.setdefault(key, []).append(np.asarray(value))
    env.close()
    return {**{k: np.stack(v) for k, v in rows.items()}, LOG_KEYS: np.array(sorted(logs))}


# ----------------------------------------------------------------------------- ours


def record_ours(case_name: str, actions: np.ndarray | None = None,
                extra: tuple[str, ...] = ()) -> tuple[dict, np.ndarray]:
    """Our rows {key: [rows, ...]} (obs keys as the reference names them, D18) and the
    actions; `actions` None draws the case's own; `extra`: KEY=VALUE for our side only."""
    from dreamerjax.config import resolve as config_resolve
    from dreamerjax.envs.host import base as host
    from dreamerjax.run import setup as setup_lib
    case = CASES[case_name]
    sets = [f"{k}={json.dumps(v)}" for k, v in {"task": case["env"], **case["sets"]}.items()]
    config, _ = config_resolve.resolve(case["configs"], [*sets, *extra])
    if case["env"].startswith("crafter"):
        deterministic_crafter()
    env = setup_lib.env_factory(config)()
    spec = env.spec
    if actions is None and case.get("policy") == "pinpad":
        actions = pinpad_actions(case_name)
    if actions is None:
        actions = actions_for(case_name, spec.discrete,
                              spec.num_actions if spec.discrete else spec.action_dims)
    col = host.HostCollector(host.HostVector([lambda: env]), config.run.episode_limit)
    out = [col.reset([ENV_SEED])]
    logs = {k: [-1] for k in case.get("log_keys", ())}  # the episode's value on its last row
    for a in actions[1:]:
        row, ends = col.step(a[None])
        out.append(row)
        for k in logs:
            logs[k].append(ends.stats[k][0] if ends.ended[0] else -1)
    col.close()
    rows = {k: np.stack([r[k][0] for r in out]) for k in ROW_KEYS}
    rows.update({k: np.array(v) for k, v in logs.items()})
    for name, _, _ in spec.obs_space:
        ref_name = "image" if case["env"].startswith("gym_") and name == "vector" else name
        rows[ref_name] = np.stack([r["obs"][name][0] for r in out])
    return rows, actions


# ----------------------------------------------------------------------------- compare


def comparable(ref: dict) -> dict:
    """The reference's rows as the fixtures keep them: images [rows, H, W, C] uint8 as
    per-row digests, floats as float32 (what the agent reads), flags as bool."""
    out = {}
    for key, value in ref.items():
        if key == LOG_KEYS:
            continue
        if value.ndim == 3:  # a [rows, cols] observation: a vector in our rows
            value = value.reshape(len(value), -1)
        if value.ndim == 4 and value.dtype == np.uint8:
            out[key] = np.array([image_digest(v) for v in value])
        elif key in ROW_KEYS[1:]:
            out[key] = value.astype(bool)
        elif np.issubdtype(value.dtype, np.floating):
            out[key] = value.astype(np.float32)
        else:
            out[key] = value
    return out


def _documented(case_name: str, key: str, ref: dict, ours: dict) -> dict[str, np.ndarray]:
    """Rows [rows] bool that a documented deviation (docs/deviations.md) explains."""
    rows = len(ours["reward"])
    out = {}
    if CASES[case_name]["env"].startswith("atari"):
        if key == "image":  # D12: the reference's reset row pools the old frames
            out["D12"] = ours["is_first"]
        if key == "is_terminal":  # D13: its own frame limit counts as a termination
            out["D13"] = ours["is_last"] & ~ours["is_terminal"] & ref["is_terminal"]
    if CASES[case_name]["env"].startswith("memmaze") and key == "is_terminal":
        # D30: FromGym marks the maze's own time limit is_terminal.
        out["D30"] = ours["is_last"] & ~ours["is_terminal"] & ref["is_terminal"]
    return {k: v for k, v in out.items() if v.shape == (rows,)}


def compare(case_name: str, ref: dict, ours: dict) -> dict:
    """Per key: rows that differ, the first, the largest difference, and how many of them
    each documented deviation explains; `undocumented` counts the rest."""
    raw, ref = ref, comparable(ref)
    result = {"log_keys_of_reference": [str(k) for k in raw.get(LOG_KEYS, [])],
              "keys_only_in_reference": sorted(set(ref) - set(ours)),
              "keys_only_in_ours": sorted(set(ours) - set(ref)), "keys": {}}
    for key in sorted(set(ref) & set(ours)):
        a = ref[key]
        b = (np.array([image_digest(v) for v in ours[key]]) if a.dtype.kind == "U"
             else ours[key])
        if key.startswith("log_"):  # ours reports the episode's value where it ends
            a, b = np.where(ours["is_last"], a, -1), b
        if a.shape != b.shape:
            result["keys"][key] = {"shape_reference": list(a.shape),
                                   "shape_ours": list(b.shape), "undocumented": len(b)}
            continue
        differ = (a != b).reshape(len(a), -1).any(-1)
        entry = {"rows": int(differ.sum()),
                 "first": int(np.argmax(differ)) if differ.any() else None}
        if a.dtype.kind == "f" and differ.any():
            entry["max_abs"] = float(np.abs(a.astype(np.float64) - b).max())
        elif raw[key].ndim == 4 and differ.any():  # images, when not from a fixture
            entry["max_abs"] = int(np.abs(raw[key].astype(np.int16) - ours[key]).max())
        rest = differ.copy()
        for label, explained in _documented(case_name, key, ref, ours).items():
            hit = rest & explained
            if hit.any():
                entry.setdefault("documented", {})[label] = int(hit.sum())
            rest &= ~explained
        entry["undocumented"] = int(rest.sum())
        entry["first_undocumented"] = int(np.argmax(rest)) if rest.any() else None
        result["keys"][key] = entry
    return result


def summary_line(case_name: str, result: dict) -> str:
    keys = result["keys"]
    bad = {k: e["undocumented"] for k, e in keys.items() if e["undocumented"]}
    bad.update({f"missing:{k}": 1 for k in result["keys_only_in_reference"]})
    doc: dict[str, int] = {}
    for e in keys.values():
        for label, n in e.get("documented", {}).items():
            doc[label] = doc.get(label, 0) + n
    rows = CASES[case_name]["rows"]
    return (f"{case_name}: {rows} rows, {len(keys)} keys; undocumented "
            f"{json.dumps(bad) if bad else 'none'}; documented "
            f"{', '.join(f'{k} {v} rows' for k, v in sorted(doc.items())) or 'none'}")


# ----------------------------------------------------------------------------- fixtures


def save_fixture(path: Path, ref: dict, actions: np.ndarray, versions: dict) -> None:
    """The reference's rows (images as digests), the actions and the names of the log_
    keys it emitted, compressed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    logs = {"log_keys": ref[LOG_KEYS]} if LOG_KEYS in ref else {}
    np.savez_compressed(path, actions=actions, versions=json.dumps(versions), **logs,
                        **{f"ref/{k}": v for k, v in comparable(ref).items()})


def load_fixture(path: Path) -> tuple[dict, np.ndarray, dict]:
    """(rows, actions, versions); versions["log_keys"]: the reference's log_ key names
    where the fixture recorded them."""
    with np.load(path) as f:
        ref = {k[4:]: f[k] for k in f.files if k.startswith("ref/")}
        versions = json.loads(str(f["versions"]))
        if "log_keys" in f.files:
            versions["log_keys"] = [str(k) for k in f["log_keys"]]
        return ref, f["actions"], versions


# ----------------------------------------------------------------------------- main


def versions() -> dict:
    from importlib import metadata
    out = {"python": sys.version.split()[0]}
    for name in ("numpy", "ale-py", "dm-control", "mujoco", "crafter", "gymnasium",
                 "pillow", "labmaze", "procgen-mirror", "gym3", "gym", "bsuite",
                 "memory-maze"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _run_reference(args, case: str, actions: np.ndarray) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "actions.npy", actions)
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("PYTHONPATH", None)  # the reference side imports nothing of ours
        subprocess.run([args.reference_python, __file__, "--record-reference", case,
                        "--reference", str(args.reference), "--tmp", tmp], check=True,
                       env=env)
        with np.load(Path(tmp) / "rows.npz") as f:
            rows = {k: f[k] for k in f.files if k != "versions"}
            return rows, json.loads(str(f["versions"]))


def _reference_child(args) -> int:
    actions = np.load(Path(args.tmp) / "actions.npy")
    rows = record_reference(Path(args.reference), args.record_reference, actions)
    np.savez(Path(args.tmp) / "rows.npz", versions=json.dumps(versions()), **rows)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reference", type=Path, required=True,
                   help="an extracted danijar/dreamerv3 checkout at 29eb964")
    p.add_argument("--reference-python", default=sys.executable)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--fixtures", type=Path, help="write the reference's rows here")
    p.add_argument("--ours-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a key for our side only (e.g. env.atari100k.sticky_literal=True)")
    p.add_argument("--record-reference", help=argparse.SUPPRESS)
    p.add_argument("--tmp", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.record_reference:
        return _reference_child(args)
    start = time.time()
    out = {"command": " ".join(["python", "benchmarks/reference_wrappers.py",
                                *(argv if argv is not None else sys.argv[1:])]),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                                    capture_output=True, text=True).stdout.strip(),
           "reference": str(args.reference), "started": time.strftime(
               "%Y-%m-%d %H:%M:%S UTC", time.gmtime(start)),
           "versions_ours": versions(), "cases": {}}
    for case in args.cases.split(","):
        ours, actions = record_ours(case, extra=tuple(args.ours_set))
        ref, ref_versions = _run_reference(args, case, actions)
        out["versions_reference"] = ref_versions
        result = compare(case, ref, ours)
        out["cases"][case] = result
        result["summary"] = summary_line(case, result)
        print(result["summary"], flush=True)
        if args.fixtures:
            save_fixture(args.fixtures / f"{case}.npz", ref, actions, ref_versions)
    out["seconds"] = round(time.time() - start, 1)
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
