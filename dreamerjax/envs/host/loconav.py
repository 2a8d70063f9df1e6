"""LocoNav as host envs (`--env loconav_ant_maze_m`): a walker finds the goal in a maze.

The semantics of the reference's LocoNav env (embodied/envs/loconav.py at 29eb964, with
its DMC / FromDM / ExpandScalars / ActionRepeat wrappers), settings configs.yaml:86:

- `loconav_WALKER_ARENA[_FREQhz]`: the walker `ant` (dm_control's locomotion Ant), the
  arena `maze_s`, `maze_m`, `maze_l`, `maze_xl`, `maze_xxl` or `empty`, the control
  frequency FREQ (default 50 Hz; physics at min(1 / FREQ / 4, 0.02) s), loconav.py:19-43;
- the maze: a labmaze fixed layout (one spawn P, one goal G) scaled by 1.2 with walls 2
  high, the walls flat-coloured per character (`*` light grey, 1-9 matplotlib's tab10
  colours), a target sphere of radius 1.2 on the ground at the goal (loconav.py:93-117);
- dm_control's RepeatSingleGoalMaze with a random spawn rotation, reward 1 on every step
  while the target is activated (once reached it stays so for the episode), no
  termination on the goal (the reference's after_step override, loconav.py:44-50, with
  max_repeats 1), aliveness threshold -1 and no contact termination; a 60 s time limit
  (3,000 steps at 50 Hz) ends an episode as a time limit;
- observations: the walker's proprioception and its egocentric camera, named as
  dm_control names them with '/' replaced by '_' (`walker_joints_pos`, ...,
  `walker_egocentric_camera` a [64, 64, 3] uint8 image), vectors as float32 [D];
- `repeat`: the action repeat, stopping at an episode end, summing float32 step rewards
  in float64 (as DMC, dmc.py here); the action clipped and mapped to the spec's bounds in
  the reference's dtypes;
- per episode `log_coverage`: the number of distinct integer-rounded (x, y) cells the
  walker's root visited, its reset position included (loconav.py:62, 75-81 logs the running
  count every step; the preset's log_keys_max '^log_.*' keeps its maximum, the final
  count). e3f0224 spells it `log/coverage`.

The reference also renders `log_image` (camera `camera`, -1: 4 for the ant) every step
for its videos; here render() draws that camera for `dreamerjax eval --video` only.

The reference's `quadruped` walker is its own model (embodied/envs/loconav_quadruped.xml,
loconav.py:87-89, not part of dm_control) and is refused (docs/deviations.md, D25). The
reference builds the env unseeded (random_state None, loconav.py:52, 113); `reset(seed)`
builds it with that seed (D27).
"""

from __future__ import annotations

import os

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, box_fields, check_obs_space
from dreamerjax.envs.host.dmc import repeat_step

WALKERS = ("ant",)
DEFAULT_CAMERAS = {"ant": 4}  # loconav.py:11-14
# The arenas' layouts, one string per row: '.' floor, 'P' the spawn, 'G' the goal, '*' and
# 1-9 walls (the character picks the wall's colour), ' ' outside the maze.
MAPS: dict[str, tuple[str, ...]] = {
    "maze_s": (
        "      66666", "      6...6", "      6.G.6", "      6...6", "      5...4",
        "      5...4", "1111555...4", "1.........3", "1.P.......3", "1.........3",
        "11112223333"),
    "maze_m": (
        "66668887777", "6.........7", "6.G.......7", "6.........7", "6665555...4",
        "      5...4", "1111555...4", "1.........3", "1.P.......3", "1.........3",
        "11112223333"),
    "maze_l": (
        "88887776666...", "8.........6...", "8.G.......6...", "8.........6555",
        "8888777......5", "......7......5", "11111.7......5", "1...1.7999...5",
        "1...1....9...5", "1...111999...5", "2............4", "2....P.......4",
        "2............4", "22223333334444"),
    "maze_xl": (
        "99999998888.44444", "9.........8.4...4", "9.......G.8.4...4", "9.........8.4...4",
        "6...7778888.5...3", "6...7.......5...3", "6...777555555...3", "5...............3",
        "5...............3", "5...............3", "5555444...666...3", "......4...6.6...3",
        "1111444...6.6...3", "1.........2.1...1", "1.P.......2.1...1", "1.........2.1...1",
        "11111112222.11111"),
    "maze_xxl": (
        "7777***666***9999", "7...............9", "7.............G.9", "7...............9",
        "*...555******9999", "*...5............", "*...555******3333", "8...............3",
        "8...............3", "8...............3", "8888******444...*", "............4...*",
        "1111******444...*", "1...............2", "1.P.............2", "1...............2",
        "1111***666***2222"),
    "empty": ("." * 17,) * 17,
}
# matplotlib's tab10 colours 1-9 (the reference's wall colours, loconav.py:106-108).
TAB10 = ("1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd", "8c564b", "e377c2", "7f7f7f",
         "bcbd22")
DEFAULT_WALL = (0.8, 0.8, 0.8)
TIME_LIMIT = 60.0  # seconds of simulated time per episode (loconav.py:52)


def parse_task(task: str, env_id: str) -> tuple[str, str, int]:
    """`WALKER_ARENA[_FREQhz]` -> (walker, arena, control frequency in Hz)."""
    tasks = ", ".join(f"loconav_{w}_{a}" for w in WALKERS for a in MAPS)
    name, freq = task, 50
    if task.endswith("hz"):
        name, _, hz = task.rpartition("_")
        if not hz[:-2].isdigit() or int(hz[:-2]) < 1:
            raise ValueError(f"--env {env_id}: the frequency suffix is _<N>hz, got {hz!r}")
        freq = int(hz[:-2])
    walker, _, arena = name.partition("_")
    if walker == "quadruped":
        raise ValueError(f"--env {env_id}: the reference's quadruped is its own model "
                         "(loconav_quadruped.xml, not in dm_control) and is not available; "
                         f"tasks: {tasks} (optionally _<N>hz)")
    if walker not in WALKERS or arena not in MAPS:
        raise ValueError(f"--env {env_id}: unknown LocoNav task {task!r}; tasks: {tasks} "
                         "(optionally _<N>hz)")
    return walker, arena, freq


def _entity_layer(arena: str) -> str:
    return "".join(row.replace(".", " ") + "\n" for row in MAPS[arena])


def _wall_colors() -> dict[str, tuple[float, ...]]:
    colors = {"*": DEFAULT_WALL}
    for i, hex_ in enumerate(TAB10):
        colors[str(i + 1)] = tuple(int(hex_[j:j + 2], 16) / 255 for j in (0, 2, 4))
    return colors


def _build(walker_name: str, arena_name: str, freq: int, seed: int | None):
    """(composer environment, walker), seeded by `seed` (None: unseeded)."""
    import labmaze
    from dm_control import composer, mjcf
    from dm_control.locomotion.arenas import mazes
    from dm_control.locomotion.props import target_sphere
    from dm_control.locomotion.tasks import random_goal_maze
    from dm_control.locomotion.walkers import ant

    class FlatWall(composer.Entity):
        """One flat-coloured wall texture (what MazeWithTargets takes per wall char)."""

        def _build(self, rgb):
            self._mjcf_root = mjcf.RootElement(model="loconav_wall")
            self._textures = [self._mjcf_root.asset.add(
                "texture", type="2d", name="wall", builtin="flat", rgb1=rgb, width=100,
                height=100)]

        @property
        def mjcf_model(self):
            return self._mjcf_root

        @property
        def textures(self):
            return self._textures

    class SingleGoal(random_goal_maze.RepeatSingleGoalMaze):
        """Rewarded while the target is activated; the goal never moves or ends the
        episode (the reference's after_step, loconav.py:44-50)."""

        def after_step(self, physics, random_state):
            random_goal_maze.NullGoalMaze.after_step(self, physics, random_state)
            self._rewarded_this_step = self._target.activated
            self._targets_obtained = int(self._target.activated)

    rng = np.random.RandomState(seed)
    maze = labmaze.FixedMazeWithRandomGoals(
        entity_layer=_entity_layer(arena_name), num_spawns=1, num_objects=1,
        random_state=rng)
    arena = mazes.MazeWithTargets(
        maze, xy_scale=1.2, z_height=2.0, aesthetic="default", name="maze",
        wall_textures={c: FlatWall(rgb) for c, rgb in _wall_colors().items()})
    walker = ant.Ant()
    task = SingleGoal(
        walker=walker, maze_arena=arena,
        target=target_sphere.TargetSphere(radius=1.2, height_above_ground=0.0),
        max_repeats=1, randomize_spawn_rotation=True, target_reward_scale=1.0,
        aliveness_threshold=-1.0, contact_termination=False,
        physics_timestep=min(1 / freq / 4, 0.02), control_timestep=1 / freq)
    env = composer.Environment(time_limit=TIME_LIMIT, task=task, random_state=seed,
                               strip_singleton_obs_buffer_dim=True)
    return env, walker


def _obs_name(key: str) -> str:
    return ("obs_reward" if key == "reward" else key).replace("/", "_")


class LocoNavEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, repeat: int = 2,
                 size=(64, 64), camera: int = -1):
        os.environ.setdefault("MUJOCO_GL", "egl")
        env_id = env_id or f"loconav_{task}"
        self._walker_name, self._arena, self._freq = parse_task(task, env_id)
        if repeat < 1:
            raise ValueError(f"env.loconav.repeat must be >= 1, got {repeat}")
        self.repeat, self.size = int(repeat), tuple(int(s) for s in size)
        self.camera = DEFAULT_CAMERAS[self._walker_name] if camera == -1 else int(camera)
        self._env, self._walker = _build(self._walker_name, self._arena, self._freq, None)
        self._keys, obs_space = [], []
        for key, value in self._env.observation_spec().items():
            shape = tuple(value.shape)
            if int(np.prod(shape)) == 0:
                continue
            self._keys.append(key)
            if len(shape) == 3 and value.dtype == np.uint8:
                obs_space.append((_obs_name(key), shape, "uint8"))
            else:
                obs_space.append((_obs_name(key), (max(int(np.prod(shape)), 1),), "float32"))
        act = self._env.action_spec()
        self._act_shape = tuple(act.shape)
        self._low = np.broadcast_to(np.asarray(act.minimum), act.shape).ravel()
        self._high = np.broadcast_to(np.asarray(act.maximum), act.shape).ravel()
        steps = round(TIME_LIMIT * self._freq)
        self._visited: set[tuple[int, int]] = set()
        self.spec = HostSpec(
            env_id=env_id, obs_space=check_obs_space(env_id, tuple(obs_space)),
            discrete=False, num_actions=0, action_dims=int(np.prod(act.shape)),
            **box_fields(self._low, self._high, self._act_shape),
            episode_limit=-(-steps // self.repeat), episode_keys=(("log_coverage", "int32"),))

    @property
    def physics(self):
        return self._env.physics

    def _obs(self, time_step) -> dict[str, np.ndarray]:
        obs = {}
        for key in self._keys:
            value = np.asarray(time_step.observation[key])
            name = _obs_name(key)
            obs[name] = value if value.ndim == 3 and value.dtype == np.uint8 else (
                value.astype(np.float32).reshape(-1))
        return obs

    def _visit(self) -> int:
        x, y = np.asarray(self._walker.get_pose(self._env.physics)[0]).reshape(-1)[:2]
        self._visited.add((int(np.round(x)), int(np.round(y))))
        return len(self._visited)

    def reset(self, seed: int | None = None):
        if seed is not None:
            self._env.close()
            self._env, self._walker = _build(self._walker_name, self._arena, self._freq,
                                             int(seed))
        ts = self._env.reset()
        self._visited = set()
        self._visit()
        return self._obs(ts)

    def step(self, action):
        ts, reward = repeat_step(self._env, action, (self._low, self._high, self._act_shape),
                                 self.repeat, self.spec.env_id)
        terminal = bool(ts.last() and ts.discount == 0)
        info = {"episode_log": {"log_coverage": self._visit()}}
        return self._obs(ts), reward, terminal, bool(ts.last() and not terminal), info

    def render(self):
        """The reference's `log_image` camera, [size..., 3] uint8."""
        return self._env.physics.render(*self.size, camera_id=self.camera)

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:  # noqa: BLE001, S110 - closing is best effort
            pass


make = LocoNavEnv  # the registry's constructor: make(task, env_id=..., **settings)
