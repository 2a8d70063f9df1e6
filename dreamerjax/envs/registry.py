"""Environment suites by id prefix, imported lazily.

Env ids are `SUITE_TASK`, split at the first underscore as the reference's main.py
splits `config.task` (dreamerv3/main.py:192): `gymnax_CartPole-v1`, `craftax_Craftax-
Classic-Symbolic-v1`, `playground_CartpoleBalance`, `brax_ant`. An id without an
underscore is a bare gymnax id (`CartPole-v1`), as before suites existed.

A suite's module is imported only when an id of it is built, and only after its
packages are found, so a missing extra is a one-line error with the install command
(before anything compiles) and `dreamerjax envs` can list every suite without importing
any. Compiled suites (JAX-native) provide `make(task, episode_limit, **options) ->
EnvSpec`; host suites register here too with `compiled=False` and their own contract.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType


class MissingExtra(ValueError):
    """An env id whose suite's packages are not installed (a bad-input error: the CLI
    prints it as one line)."""


@dataclasses.dataclass(frozen=True)
class Suite:
    """One environment family."""

    name: str  # the id prefix
    module: str  # the adapter module, imported on first use
    requires: tuple[str, ...]  # top-level packages it imports
    extra: str = ""  # pyproject extra that installs them; "" for the base install
    compiled: bool = True  # JAX-native: steps inside the compiled chunk
    about: str = ""
    example: str = ""
    # Packages whose pins conflict with the project's (numpy<2) but that run beside it:
    # installed without their dependencies, after the extra.
    no_deps: tuple[str, ...] = ()

    @property
    def install(self) -> str:
        """The command that installs this suite's packages."""
        if not self.extra:
            return "(base install)"
        command = install_command(self.extra)
        if self.no_deps:
            command += f", then pip install --no-deps {' '.join(self.no_deps)}"
        return command

    def missing(self) -> tuple[str, ...]:
        """The required packages that cannot be found (nothing is imported)."""
        return tuple(r for r in self.requires if importlib.util.find_spec(r) is None)

    def installed(self) -> bool:
        return not self.missing()

    def load(self, env_id: str = "") -> ModuleType:
        """Import the adapter module; MissingExtra names the install command."""
        missing = self.missing()
        if missing:
            what = f"env {env_id!r}" if env_id else f"suite {self.name!r}"
            raise MissingExtra(
                f"{what} needs {', '.join(missing)} (not installed): {self.install}")
        return importlib.import_module(self.module)


def checkout_root() -> Path | None:
    """The source checkout this package runs from (an editable install, PYTHONPATH), or
    None for an installed wheel (whose site-packages has no pyproject.toml beside it)."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() else None


def install_command(extra: str) -> str:
    """The command that installs a pyproject extra; `-e .` only when run from a checkout,
    where the checkout itself is what to install."""
    command = f"pip install 'dreamerjax[{extra}]'"
    if checkout_root() is not None:
        command += f" (in this checkout: pip install -e '.[{extra}]')"
    return command


SUITES: dict[str, Suite] = {}
"""Prefix -> suite, in listing order."""

REGISTERED_BY: dict[str, str] = {}
"""Env id -> the module that registered it with dreamerjax.register_env. A run records it
(config.json's "env_modules"), so that a fresh process (`dreamerjax eval RUN`) imports
it again and finds the env."""


def registering_modules(env_id: str) -> tuple[str, ...]:
    """The modules to import in a fresh process for `env_id` to exist: the one that
    registered it, unless that was a script or notebook (`__main__`, not importable)."""
    module = REGISTERED_BY.get(env_id, "")
    return (module,) if module and module != "__main__" else ()


def registered_in_script(env_id: str) -> bool:
    """Whether a script or notebook (`__main__`) registered `env_id`: a fresh process
    finds it only if it runs that registration again (--import MODULE, register_env)."""
    return REGISTERED_BY.get(env_id) == "__main__"


def register(suite: Suite) -> Suite:
    """Add a suite (the suites below, or a user's own)."""
    if "_" in suite.name:
        raise ValueError(f"suite name {suite.name!r}: no underscore (ids split at the first)")
    if suite.name in SUITES:
        raise ValueError(f"suite {suite.name!r} is already registered")
    SUITES[suite.name] = suite
    return suite


register(Suite(
    "gymnax", "dreamerjax.envs.compiled.gymnax", ("gymnax",),
    about="classic control, MinAtar, bsuite and misc envs in JAX",
    example="gymnax_CartPole-v1"))
register(Suite(
    "craftax", "dreamerjax.envs.compiled.craftax", ("craftax",), extra="craftax",
    about="Crafter (Classic) and Craftax in JAX; symbolic vectors or pixels",
    example="craftax_Craftax-Classic-Symbolic-v1"))
register(Suite(
    "playground", "dreamerjax.envs.compiled.playground", ("mujoco_playground", "mujoco"),
    extra="playground",
    about="MuJoCo Playground's DeepMind Control Suite on MJX (proprioceptive)",
    example="playground_CartpoleBalance"))
register(Suite(
    "brax", "dreamerjax.envs.compiled.brax", ("brax",), extra="brax",
    about="Brax locomotion envs (ant, halfcheetah, hopper, ...)",
    example="brax_ant"))


register(Suite(
    "gym", "dreamerjax.envs.host.gym", ("gymnasium",), extra="gym", compiled=False,
    about="any registered Gymnasium env (Box/Discrete), on the host",
    example="gym_CartPole-v1"))
register(Suite(
    "atari", "dreamerjax.envs.host.atari", ("ale_py", "PIL"), extra="atari", compiled=False,
    about="Atari 2600 through ale-py, the reference's wrapper", example="atari_pong"))
register(Suite(
    "atari100k", "dreamerjax.envs.host.atari", ("ale_py", "PIL"), extra="atari",
    compiled=False, about="Atari 100k settings (colour, 100k frames)",
    example="atari100k_pong"))
register(Suite(
    "dmc", "dreamerjax.envs.host.dmc", ("dm_control", "mujoco"), extra="dmc", compiled=False,
    about="DeepMind Control Suite through dm_control", example="dmc_walker_walk"))
register(Suite(
    "crafter", "dreamerjax.envs.host.crafter", ("crafter",), extra="crafter", compiled=False,
    about="Crafter, achievements per episode", example="crafter_reward"))
register(Suite(
    "loconav", "dreamerjax.envs.host.loconav", ("dm_control", "mujoco", "labmaze"),
    extra="loconav", compiled=False,
    about="the Ant finding a goal in a labmaze maze (dm_control locomotion)",
    example="loconav_ant_maze_m"))
register(Suite(
    "pinpad", "dreamerjax.envs.host.pinpad", (), compiled=False,
    about="PinPad: visit the coloured pads in order (numpy grid world)",
    example="pinpad_three"))
register(Suite(
    "procgen", "dreamerjax.envs.host.procgen", ("procgen", "gym3", "gym"), extra="procgen",
    compiled=False, about="ProcGen's 16 games (procgen-mirror)", example="procgen_coinrun",
    no_deps=("procgen-mirror", "gym3")))
register(Suite(
    "bsuite", "dreamerjax.envs.host.bsuite", ("bsuite", "dm_env"), extra="bsuite",
    compiled=False, about="Behaviour Suite experiments, EXPERIMENT/ID",
    example="bsuite_catch/0"))
register(Suite(
    "memmaze", "dreamerjax.envs.host.memmaze", ("memory_maze", "dm_control", "gym"),
    extra="memmaze", compiled=False, about="Memory Maze through dm_control (9x9 ... 15x15)",
    example="memmaze_9x9"))


def parse_env_id(env_id: str) -> tuple[Suite, str]:
    """`SUITE_TASK` -> (suite, task); a bare id (no underscore) is a gymnax task."""
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id {env_id!r}: expected SUITE_TASK, e.g. gymnax_CartPole-v1")
    if "_" not in env_id:
        return SUITES["gymnax"], env_id
    prefix, task = env_id.split("_", 1)
    if prefix not in SUITES:
        raise ValueError(
            f"env id {env_id!r}: unknown suite {prefix!r}; suites: {', '.join(SUITES)} "
            "(ids are SUITE_TASK, e.g. gymnax_CartPole-v1; a bare gymnax id also works; an "
            "env registered by a module of yours: import it first, --import MODULE)")
    if not task:
        raise ValueError(f"env id {env_id!r}: no task after the suite prefix")
    return SUITES[prefix], task


def listing() -> list[dict]:
    """One entry per suite for `dreamerjax envs`: name, installed, install, ..."""
    return [dict(suite=s.name, installed=s.installed(), compiled=s.compiled,
                 install=s.install, example=s.example, about=s.about,
                 missing=list(s.missing())) for s in SUITES.values()]


def describe() -> str:
    """The `dreamerjax envs` text: one line per suite, installed or how to install."""
    lines = []
    for s in SUITES.values():
        state = "installed" if s.installed() else f"not installed: {s.install}"
        kind = "compiled" if s.compiled else "host"
        lines.append(f"{s.name:<11} {kind:<8} {state:<40} e.g. {s.example}  {s.about}")
    lines.append("Env ids are SUITE_TASK (split at the first underscore); a bare id is a "
                 "gymnax task.")
    return "\n".join(lines)
