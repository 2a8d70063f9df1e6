"""The reference's own DeepMind Control env (`--env dmc_<domain>_<task>`, e3f0224 only).

The env is embodied/envs/dmc.py @e3f0224 (`DMC`: dm_control's `suite.load`, `FromDM`, the
action repeat, the `log/image` render), built and wrapped by the checkout's own
`make_env(config, index)` (dreamerv3/main.py:212-258 @e3f0224) from the config's `task` and
`env.dmc` entries, so the domain, task, repeat, size, camera, proprio and image settings
are the reference's. The harness adds one outer layer, `EpisodeLog`, which passes every
call through unchanged and only watches the rows:

- the training episode log (episodes.jsonl) as the port envs write it (port_env.py): per
  finished episode its worker, last row, steps, score and termination. The score is the
  reference's `episode/score`: the float64 sum of the rows' rewards from the `is_first`
  row to the `is_last` one, as train.py:31-51 @e3f0224 sums them with elements.Agg;
- the state a resume needs: the reference env object itself, pickled (dm_control's
  Physics pickles its MjData and model, mujoco/engine.py `__getstate__`), zlib-compressed
  (a Control Suite model carries its textures: about 12 MB raw, under 1 MB compressed),
  so a resumed env continues its episode from the same physics, task state and step
  count, and the episode's running score.

What the harness sets on the env: the dm_control task's generator, a
`numpy.random.RandomState` seeded from SeedSequence (run seed, stream, env index) as
`suite.load(..., task_kwargs={'random': seed})` would seed it (the reference leaves it to
dm_control's default, fresh OS entropy), so the evaluation envs start from the same states
at every evaluation; and MUJOCO_GL=egl when unset, before dm_control is imported, as the
reference's Dockerfile:32 @e3f0224 does (DMC.__init__ sets it too, but only after its
module has imported dm_control, whose backend is chosen at import).

Importing this module needs nothing of the reference; the functions that build envs
import it.
"""

from __future__ import annotations

import math
import os
import pickle
import zlib

SUITE = "dmc"


def parse_env(name: str, ports) -> tuple[str, str]:
    """`--env` as (suite, task): ('port', name) for a port of `ports`, ('dmc',
    '<domain>_<task>') for `dmc_<domain>_<task>`. Anything else is refused in one line
    that names --env."""
    if name in ports:
        return "port", name
    suite, _, task = name.partition("_")
    domain, _, rest = task.partition("_")
    if suite == SUITE and domain and rest:
        return SUITE, task
    raise SystemExit(f"--env {name}: neither a port ({', '.join(sorted(ports))}) nor "
                     "dmc_<domain>_<task> (the reference's DeepMind Control env)")


def is_dmc(name: str) -> bool:
    return name.startswith(SUITE + "_")


# MUJOCO_GL's values that turn rendering off (dm_control's _render/constants.py).
NO_RENDERER = ("off", "disable", "disabled", "false", "0")


def set_gl_backend(environ=os.environ, blank: bool = False) -> str:
    """MUJOCO_GL=egl unless set (Dockerfile:32 @e3f0224): a machine without a display
    renders headless. Must run before dm_control is imported. A value that turns
    rendering off is refused: the reference's DMC renders on every step. With `blank`
    (--blank-render) nothing is rendered, and MUJOCO_GL is `disable` unless set."""
    if blank:
        return environ.setdefault("MUJOCO_GL", "disable")
    backend = environ.setdefault("MUJOCO_GL", "egl")
    if backend.lower() in NO_RENDERER:
        raise SystemExit(f"MUJOCO_GL={backend}: the reference's DMC renders an image on "
                         "every step, also with images off (embodied/envs/dmc.py:71-72 "
                         "@e3f0224); set MUJOCO_GL=egl (or osmesa), or take "
                         "--blank-render where images are off")
    return backend


class BlankRender:
    """In place of a dm_control Physics' `render` (--blank-render): the image the
    reference's DMC asks for on every step, all zeros, with render's shape and dtype
    ([height, width, 3] uint8). With images off the image is `log/image`, which neither
    the agent nor the replay reads (dmc.py:55 and :71-72, replay.py:78 @e3f0224), so the
    run's numbers are the same (benchmarks/reference_run/README.md has the two runs);
    a machine without a GL library can then run the reference's DMC, and an env step
    costs the physics alone."""

    def __call__(self, height: int = 240, width: int = 320, camera_id=-1, **_):
        import numpy as np
        return np.zeros((height, width, 3), np.uint8)


def blank_render(env) -> None:
    """Give the reference's DMC inside `env` (its wrappers forward `_dmenv`) a
    BlankRender; refused where the env's images are on, whose zeros the agent would see."""
    if getattr(env, "_image", False):
        raise SystemExit("--blank-render: this env's images are on (env.dmc.image); the "
                         "agent would see blank images")
    env._dmenv.physics.render = BlankRender()


def task_generator(entropy):
    """A RandomState for the dm_control task from a SeedSequence entropy tuple."""
    import numpy as np
    seed = np.random.SeedSequence(entropy).generate_state(1)[0]
    return np.random.RandomState(int(seed))


class EpisodeLog:
    """The reference's wrapped env (its make_env's result) with the episode log and the
    state for checkpoints. Passes actions and observations through unchanged."""

    def __init__(self, env, worker: int = 0, episodes: list | None = None,
                 run_seed: int = 0, blank: bool = False) -> None:
        self.env = env
        self._worker, self._episodes, self._run_seed = worker, episodes, run_seed
        self._blank = blank
        if blank:
            blank_render(env)
        self._row = 0
        self._score = 0.0
        self._length = 0

    @property
    def obs_space(self):
        return self.env.obs_space

    @property
    def act_space(self):
        return self.env.act_space

    def step(self, action):
        obs = self.env.step(action)
        if obs["is_first"]:
            self._score, self._length = 0.0, 0
        else:
            self._length += 1
        self._score += float(obs["reward"])  # 0 on the first row (FromDM)
        if obs["is_last"] and self._episodes is not None:
            self._episodes.append({
                "seed": self._run_seed, "worker": self._worker, "row_last": self._row,
                "length": self._length, "score": self._score,
                "terminal": bool(obs["is_terminal"])})
        self._row += 1
        return obs

    def save(self) -> dict:
        return {"env": zlib.compress(pickle.dumps(self.env, pickle.HIGHEST_PROTOCOL), 1),
                "row": self._row, "score": self._score, "length": self._length}

    def load(self, state: dict) -> None:
        """Put the saved env object in place of this one's (the driver holds this
        wrapper, so it steps the restored env from now on)."""
        old, self.env = self.env, pickle.loads(zlib.decompress(state["env"]))
        old.close()
        if self._blank:  # a Physics is pickled without its attributes (its MjData only)
            blank_render(self.env)
        self._row, self._score, self._length = state["row"], state["score"], state["length"]

    def close(self) -> None:
        self.env.close()


def make_env(ref_main, config, index: int, entropy, worker: int = 0,
             episodes: list | None = None, run_seed: int = 0,
             blank: bool = False) -> EpisodeLog:
    """The checkout's make_env(config, index) (its DMC for a `dmc_` task, wrapped by its
    wrap_env), its task generator seeded from `entropy`, under an EpisodeLog (with a
    BlankRender where `blank`)."""
    set_gl_backend(blank=blank)
    env = ref_main.make_env(config, index)
    task = env._dmenv.task  # embodied's Wrapper forwards the name to DMC (dmc.py:41)
    task._random = task_generator(entropy)
    return EpisodeLog(env, worker, episodes, run_seed, blank)


def eval_limit(env, repeat: int) -> int:
    """The most policy steps an episode of this env takes: dm_control's step limit
    (time limit over control timestep, rl/control.py) over the action repeat."""
    limit = env.env._dmenv._step_limit
    if not math.isfinite(limit):
        raise SystemExit("the dm_control task has no time limit: an evaluation "
                         "episode would not end")
    return math.ceil(limit / max(1, repeat))
