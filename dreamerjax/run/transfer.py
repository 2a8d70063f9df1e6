"""A new run that starts from another run's agent: run.from_checkpoint (fine-tuning,
transfer).

The reference loads a checkpoint's agent before its own checkpoint is loaded or first
saved (embodied/run/train.py:87-90 @e3f0224, `from_checkpoint_regex` selecting parameter
names with re.match, embodied/jax/agent.py:373-380; embodied/run/train.py:98-100
@29eb964), so a run that resumes keeps its own state. Here:

    check(config, spaces)              -> Source    the plan's check (run/plan.py, kept as
                                                    Plan.source): the path, its latest
                                                    verified checkpoint, the regex, the
                                                    agent's shapes; ConfigError naming the
                                                    key, before compiling
    load_into(states, plan)                         a fresh run's state after init, with the
                                                    plan's source's selected parameters
                                                    [seeds, ...] replaced

What is carried, as the reference's agent carries it: with no regex the agent's whole
state (parameters, slow critic, optimiser state, normalisers and the agent's update
counters: the reference's agent variables hold them all, embodied/jax/agent.py:340-353
@e3f0224, dreamerv3/jaxagent.py:241-243 @29eb964) from a checkpoint with a layout, or its
parameters alone from one written one array per leaf. With a regex, the parameters whose
names (dreamerjax's parameter tree: `enc/...`, `dyn/...`, `critic/...`) match it from their
start; the rest starts fresh. The replay and the run's row counter always start fresh
(docs/deviations.md D24: 29eb964 also carries its step counter). At e3f0224 the slow
critic of a run given a regex starts as a copy of the critic (as at init), so it follows
a loaded critic.
Seeds: a seed of the new run that the source trained takes that seed's parameters; any
other seed takes the source's first seed's.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import numpy as np

from dreamerjax.config import dotted as config_dotted
from dreamerjax.config import resolve as config_resolve
from dreamerjax.config.defaults import Config, Reference
from dreamerjax.config.keys import ConfigError

KEY = "run.from_checkpoint"
REGEX_KEY = "run.from_checkpoint_regex"


@dataclasses.dataclass(frozen=True)
class Source:
    """The checkpoint a run starts from.

    run_dir: the source run's directory; index: its checkpoint (the latest verified, or
    the one named); config: the source's config; seeds: the source's seeds; names: the
    flat parameter names loaded (those matching the regex); agent: with no regex, the
    key paths (`.agent...`) of the agent's whole state in the checkpoint, loaded as a
    whole; () when only parameters are loaded."""

    run_dir: Path
    index: int
    config: Config
    seeds: tuple[int, ...]
    names: tuple[str, ...]
    agent: tuple[str, ...] = ()


def _fail(msg: str, key: str = KEY) -> ConfigError:
    return ConfigError(f"{key}: {msg}")


def _locate(value: str) -> tuple[Path, int | None]:
    """(the run directory, the checkpoint index named or None) of a run directory or of
    one of its checkpoint directories (RUN/checkpoints/<index>)."""
    from dreamerjax.run import checkpoint as ckpt

    path = Path(value).expanduser()
    if (path / "config.json").is_file():
        return path, None
    if (path.name.isdigit() and path.parent.name == ckpt.CHECKPOINT_DIR
            and (path.parent.parent / "config.json").is_file() and path.is_dir()):
        return path.parent.parent, int(path.name)
    if not path.exists():
        raise _fail(f"{value}: no such run or checkpoint directory")
    raise _fail(f"{value}: not a dreamerjax run directory (no config.json) nor one of its "
                f"checkpoints ({ckpt.CHECKPOINT_DIR}/<index>)")


def check(config: Config, spaces) -> Source | None:
    """The source of run.from_checkpoint checked against `config` (a run with observation
    and action `spaces`), or None when the key is empty: ConfigError naming the key when
    the path is not a run or checkpoint that dreamerjax wrote, has no verified checkpoint,
    the regex does not compile or selects nothing, or a selected parameter's shape differs
    (the first that differs named)."""
    from dreamerjax.run import checkpoint as ckpt
    from dreamerjax.run import policy as policy_lib

    value, regex = config.run.from_checkpoint, config.run.from_checkpoint_regex
    if not value:
        return None
    run_dir, index = _locate(value)
    cfg_path = run_dir / "config.json"
    try:
        raw = json.loads(cfg_path.read_text())
        src = config_resolve.from_mapping(config_dotted.load_file(cfg_path), str(cfg_path))
    except (OSError, ValueError) as e:
        raise _fail(f"{cfg_path}: {str(e).splitlines()[0]}") from None
    seeds = tuple(int(s) for s in raw.get("seeds", []))
    if index is None:
        try:
            found = ckpt.latest_verified(run_dir)
        except ckpt.NoGoodCheckpoint as e:
            raise _fail(str(e).splitlines()[0]) from None
        if found is None:
            raise _fail(f"{run_dir}: the run has no checkpoint yet")
        index = found[0]
    else:
        bad = ckpt.verify(run_dir, index)
        if bad is not None:
            raise _fail(f"{run_dir / ckpt.CHECKPOINT_DIR / str(index)}: {bad}")
    try:
        pattern = re.compile(regex)
    except re.error as e:
        raise _fail(f"{regex!r} is not a regular expression ({e})", REGEX_KEY) from None
    here = policy_lib._flat_params(policy_lib._param_shapes(config, spaces))
    src_spaces = _spaces_of(src, config, spaces)
    there = policy_lib._flat_params(policy_lib._param_shapes(src, src_spaces))
    names = tuple(n for n in here if pattern.match(n))
    if not names:
        raise _fail(f"{regex!r} selects no parameter (names as {', '.join(list(here)[:3])}"
                    " ...)", REGEX_KEY)
    for name in names:
        if name not in there:
            raise _fail(f"{run_dir}: its agent has another shape: no parameter {name}")
        a, b = there[name], here[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            raise _fail(f"{run_dir}: its agent has another shape: {name} is "
                        f"{a.dtype}{list(a.shape)} there, {b.dtype}{list(b.shape)} here")
    agent = _agent_leaves(run_dir, index, config, spaces) if not regex else ()
    return Source(run_dir, int(index), src, seeds, names, agent)


def _agent_leaves(run_dir: Path, index: int, config: Config, spaces) -> tuple[str, ...]:
    """The key paths of the agent's whole state (algo.agent.AgentState: parameters, slow
    critic, optimiser state, normalisers, counters) in a checkpoint with a layout, each
    checked against this run's; () for a checkpoint of one array per leaf (its
    parameters alone are read)."""
    from dreamerjax.algo import agent as agent_lib
    from dreamerjax.run import checkpoint as ckpt

    layout = ckpt._read_raw_meta(run_dir, index).get(ckpt.LAYOUT_KEY)
    if layout is None:
        return ()
    saved = {entry[0]: entry for entry in layout}
    shapes = agent_lib.state_shapes(config.agent, spaces)
    names = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(shapes)[0]:
        name = ".agent" + jax.tree_util.keystr(path)
        if name not in saved:
            raise _fail(f"{run_dir}: its agent state has no {name} (another optimiser or "
                        f"normaliser setting; {REGEX_KEY} loads parameters alone)")
        shape, dtype = tuple(saved[name][3][1:]), np.dtype(saved[name][4])
        if shape != leaf.shape or dtype != leaf.dtype:
            raise _fail(f"{run_dir}: its agent state has another shape: {name} is "
                        f"{dtype}{list(shape)} there, {leaf.dtype}{list(leaf.shape)} here")
        names.append(name)
    return tuple(names)


def load_into(states, plan):
    """`states` (a fresh run's SeedState, every leaf [seeds, ...]) with the selected agent
    parameters of the plan's source (run/plan.Plan.source, checked when the plan was made)
    in every seed (the module's docstring says which seed from which); the rest as it
    was."""
    from dreamerjax.run import policy as policy_lib

    source, config, seeds, spaces = plan.source, plan.config, plan.seeds, plan.setup.spaces
    if source is None:
        return states
    rows = np.array([source.seeds.index(s) if s in source.seeds else 0 for s in seeds])
    if source.agent:
        return states.replace(agent=_whole_agent(states.agent, source, rows))
    loaded = policy_lib._flat_params(policy_lib.stacked_params(
        source.run_dir, source.index, source.config,
        _spaces_of(source.config, config, spaces), len(source.seeds)))
    flat = policy_lib._flat_params(states.agent.params)
    for name in source.names:
        old = flat[name]
        new = np.asarray(jax.device_get(loaded[name]))[rows].astype(old.dtype)
        flat[name] = jax.device_put(new, old.sharding)
    params = policy_lib._unflatten(flat)
    agent = states.agent.replace(params=params)
    if config.agent.version == Reference.E3F0224 and any(
            n.startswith("critic/") for n in source.names):
        agent = agent.replace(slow=jax.tree.map(
            lambda p, s: jax.device_put(p, s.sharding), params["critic"], agent.slow))
    return states.replace(agent=agent)


def _whole_agent(agent, source: Source, rows: np.ndarray):
    """`agent` (AgentState [seeds, ...]) with every leaf from the source's, seed by seed."""
    from dreamerjax.run import checkpoint as ckpt

    leaves = ckpt.read_leaves(source.run_dir, source.index, source.agent)
    flat, treedef = jax.tree_util.tree_flatten_with_path(agent)
    new = [jax.device_put(leaves[".agent" + jax.tree_util.keystr(path)][rows].astype(
        old.dtype), old.sharding) for path, old in flat]
    return jax.tree_util.tree_unflatten(treedef, new)


def _spaces_of(src: Config, config: Config, spaces):
    from dreamerjax.run import setup as setup_lib

    if src.run.env == config.run.env and src.env == config.env:
        return spaces  # the same env's spaces, without building it again
    return setup_lib.make_setup(src).spaces
