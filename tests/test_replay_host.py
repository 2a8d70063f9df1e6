"""run.replay_memory host: each seed's replay rows live in pinned host memory and only the
written rows and the sampled windows cross to and from the device, inside the compiled
program (data/replay.py). The numbers are the device ring's, bit for bit: the replay's own
moves, a compiled CartPole run (fresh and resumed from a checkpoint), a host-env run; the
rows are placed in pinned_host memory (fresh, restored, after a chunk); the programs do
nothing to host-resident arrays but slice them to the device and update slices of them
(what XLA's host offloading moves on a GPU), and lower for CUDA; the memory check counts
host memory for a host replay."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _runs import small_config, without_timing
from _xla import json_of_child

from dreamerjax.config.keys import ConfigError
from dreamerjax.data import replay as replay_lib
from dreamerjax.data import schema
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import driver, memory
from dreamerjax.run import plan as plan_lib
from dreamerjax.run import setup as setup_lib
from dreamerjax.run.plan import make_plan
from dreamerjax.run.resume import load_state
from dreamerjax.run.trainers import make_trainer

HOST = "pinned_host"
E, CAP, L, B = 3, 11, 5, 6  # a ring of 11 rows per env: windows of 5 wrap around it
EXAMPLE = {"obs": {"vec": jnp.zeros((4,), jnp.float32)}, "is_first": jnp.zeros((), bool),
           "is_last": jnp.zeros((), bool), "deter": jnp.zeros((7,), jnp.float32),
           "stoch": jnp.zeros((2,), jnp.int32), "reward": jnp.zeros((), jnp.float32)}


def _placed(state: replay_lib.ReplayState) -> replay_lib.ReplayState:
    """The state placed as the trainers place it: rows in host memory for a host ring."""
    dev = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    host = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()[:1]), ("s",)),
                                      jax.sharding.PartitionSpec(), memory_kind=HOST)
    sharding = jax.tree.map(lambda _: dev, state)
    if state.memory == "host":
        sharding = sharding.replace(data=jax.tree.map(lambda _: host, state.data))
    return sharding


def _ring_run(memory_kind: str, seeds: int | None, ticks: int = 30):
    """`ticks` adds of distinct rows, each followed by a sample and a latent write-back
    (seeds vmapped, or one seed unbatched when seeds is None), in one jitted scan."""
    def init(_):
        return replay_lib.replay_init(E, CAP, EXAMPLE, L, memory=memory_kind)

    state = init(0) if seeds is None else jax.vmap(init)(jnp.arange(seeds))
    sharding = _placed(state)
    state = jax.device_put(state, sharding)

    def one(s, key, t):
        rows = jax.tree.map(
            lambda v: (jnp.arange(E * int(np.prod(v.shape[1:]))).reshape(E, *v.shape[1:])
                       * 3 + t * 100 + jax.random.randint(key, (), 0, 50)).astype(v.dtype),
            jax.tree.map(lambda x: x[:, 0], s.data))
        s = replay_lib.replay_add(s, rows)
        s, batch, index = replay_lib.replay_sample(s, key, B, L)
        s = replay_lib.replay_write_latents(s, index, batch["deter"][:, 1:] + 0.5 + t,
                                            batch["stoch"][:, 1:] + 7)
        return s, (batch, index)

    def tick(state, t):
        key = jax.random.PRNGKey(t)
        if seeds is None:
            return one(state, key, t)
        return jax.vmap(lambda s, k: one(s, k, t))(state, jax.random.split(key, seeds))

    run = jax.jit(lambda st: jax.lax.scan(tick, st, jnp.arange(ticks)), donate_argnums=0,
                  out_shardings=(sharding, None))
    return run(state)


@pytest.mark.parametrize("seeds", [None, 2])
def test_host_ring_moves_give_the_device_rings_numbers(seeds):
    (dev, out_dev), (host, out_host) = _ring_run("device", seeds), _ring_run("host", seeds)
    assert {x.sharding.memory_kind for x in jax.tree.leaves(host.data)} == {HOST}
    assert {x.sharding.memory_kind for x in jax.tree.leaves(dev.data)} == {"device"}
    assert int(np.max(host.count)) == 30 > CAP  # the ring wrapped, and windows with it
    for a, b in zip(jax.tree.leaves((dev, out_dev)), jax.tree.leaves((host, out_host)),
                    strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_seed_of_a_host_ring_samples_as_that_seed_alone():
    """replay_sample(seed=i) (the open-loop report's) reads seed i's windows from rows that
    keep their seed axis: the batch of that seed's own ring."""
    host, _ = _ring_run("host", 2)
    dev, _ = _ring_run("device", 2)
    key = jax.random.PRNGKey(5)

    @jax.jit
    def from_host(st):
        one = jax.tree.map(lambda x: x[1], st.replace(data=None)).replace(data=st.data)
        return replay_lib.replay_sample(one, key, B, L, seed=1)[1]

    want = replay_lib.replay_sample(jax.tree.map(lambda x: x[1], dev), key, B, L)[1]
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(from_host(host)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ----------------------------------------------------------------------------- programs

# What a program may do with a host-resident array (XLA's host offloader moves these and
# refuses compute on host memory): slice it (then move the slice to the device), update a
# slice of it with rows moved to the host, carry it through loops and calls.
STRUCTURAL = {"scan", "while", "pjit", "closed_call", "core_call", "shard_map",
              "custom_vmap_call", "remat", "checkpoint"}
MOVES = {"dynamic_slice", "dynamic_update_slice", "device_put"}


def _host_uses(jaxpr, found: list) -> None:
    """Every primitive applied to a host-memory value anywhere in a closed jaxpr (its
    sub-jaxprs included), and every dynamic_slice of one whose result does not go to the
    device at once."""
    def on_host(v) -> bool:
        aval = getattr(v, "aval", None)
        return getattr(aval, "memory_space", None) == jax.memory.Space.Host

    inner = jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr
    users: dict = {}
    for eqn in inner.eqns:
        for v in eqn.invars:
            if not isinstance(v, jax.extend.core.Literal):
                users.setdefault(v, []).append(eqn)
    for eqn in inner.eqns:
        name = eqn.primitive.name
        if any(on_host(v) for v in eqn.invars):
            found.append(name)
            if name == "dynamic_slice":
                nxt = [u.primitive.name for u in users.get(eqn.outvars[0], [])]
                if nxt != ["device_put"] or any(on_host(v) for u in users[eqn.outvars[0]]
                                                for v in u.outvars):
                    found.append(f"dynamic_slice then {nxt}")
            if name == "dynamic_update_slice" and not on_host(eqn.invars[1]):
                found.append("dynamic_update_slice of device rows")
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            _host_uses(sub, found)


def _check_host_program(traced, moves=("dynamic_slice", "dynamic_update_slice")
                        ) -> list[str]:
    """What a traced program does to host memory beyond `moves` (which it must do)."""
    found: list[str] = []
    _host_uses(traced.jaxpr, found)
    assert set(moves) <= set(found), sorted(set(found))
    return sorted(set(found) - STRUCTURAL - MOVES)


def test_the_check_finds_compute_on_host_memory():
    x = jax.ShapeDtypeStruct((4, 3), jnp.float32, sharding=_placed(
        replay_lib.replay_init(1, 4, EXAMPLE, 2, memory="host")).data["reward"])

    def kept_on_host(v):  # a slice that stays on the host, then arithmetic on the host
        return jax.lax.dynamic_slice(v, (1, 0), (1, 3)) * 2

    def moved(v):
        return jax.device_put(jax.lax.dynamic_slice(v, (1, 0), (1, 3)),
                              jax.memory.Space.Device) * 2

    found: list[str] = []
    _host_uses(jax.jit(kept_on_host).trace(x).jaxpr, found)
    assert "mul" in found and any(f.startswith("dynamic_slice then") for f in found)
    found = []
    _host_uses(jax.jit(moved).trace(x).jaxpr, found)
    assert found == ["dynamic_slice", "device_put"]


def _vmapped(cfg):
    return dataclasses.replace(cfg, run=dataclasses.replace(
        cfg.run, seed_loop="vmap", replay_memory="host"))


def test_the_compiled_chunk_only_moves_host_rows_and_lowers_for_cuda():
    """The chunk of a 2-seed run with its seeds vmapped (an accelerator's layout): the rows
    are sliced at explicit seed indices (no gather, no select, no arithmetic on host
    memory), the state's rows enter and leave in pinned_host memory, and the program lowers
    for CUDA."""
    trainer = make_trainer(make_plan(_vmapped(small_config()), (0, 1)))
    args = (trainer.abstract_state(), trainer.owed(1))
    traced = trainer._chunk.trace(*args)
    assert _check_host_program(traced) == []
    text = traced.lower(lowering_platforms=("cuda",)).as_text()
    main = next(x for x in text.splitlines() if "func.func public @main" in x)
    rows = len(jax.tree.leaves(args[0].replay.data))
    assert main.count('mhlo.memory_kind = "pinned_host"') == 2 * rows  # in and out


def test_the_host_paths_programs_only_move_host_rows():
    pytest.importorskip("gymnasium")
    trainer = make_trainer(make_plan(_vmapped(small_config("gym_CartPole-v1")), (0, 1)))
    states = trainer.abstract_state()
    rows = schema.env_row_spec(trainer.setup.spaces, (2, trainer.setup.run.num_envs))
    assert _check_host_program(trainer._train.trace(states, np.int32(2))) == []
    act = trainer._act.trace(states, rows)
    assert _check_host_program(act, ("dynamic_update_slice",)) == []  # adds, never reads


def test_a_host_replay_is_placed_in_pinned_host_memory(tmp_path):
    trainer = make_trainer(make_plan(small_config(replay_memory="host"), (0, 1)))
    st = trainer.init()
    kinds = lambda tree: {x.sharding.memory_kind for x in jax.tree.leaves(tree)}  # noqa: E731
    assert kinds(st.replay.data) == {HOST}
    assert kinds(st.agent) == kinds(st.replay.count) == {"device"}
    assert kinds(trainer.abstract_state().replay.data) == {HOST}
    st, _ = trainer.chunk(st, 0)
    assert kinds(st.replay.data) == {HOST}
    report = trainer.report(st, 0)  # the first seed's windows read from the host rows
    assert report and all(np.isfinite(np.asarray(x, np.float64)).all()
                          for x in jax.tree.leaves(report))
    ckpt.save(tmp_path, 1, st, {"config": {}})
    back = ckpt.restore(tmp_path, 1, trainer.abstract_state())
    assert kinds(back.replay.data) == {HOST} and kinds(back.agent) == {"device"}
    for a, b in zip(jax.tree.leaves(st), jax.tree.leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ----------------------------------------------------------------------------- whole runs


def _equal_runs(a, b) -> None:
    assert [without_timing(r) for r in a.records] == [without_timing(r) for r in b.records]
    for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_compiled_run_with_a_host_replay_equals_the_device_replays(tmp_path):
    """The tests' small CartPole run, two seeds, 160 rows: with a device replay in one go;
    with a host replay stopped at row 80 and resumed (its checkpoint restores into host
    memory). Records and final parameters are bitwise the same; the checkpoints at row 160
    hold the same state."""
    def train(memory_kind, out, **kw):
        cfg = small_config(steps=160, replay_memory=memory_kind)
        return driver.train(cfg, (0, 1), str(out), progress=False,
                            tensorboard=False, report=False, **kw)

    dev = train("device", tmp_path / "device")
    first = train("host", tmp_path / "host", stop_after_rows=80)
    assert [r["rows"] for r in first.records] == [80, 80]
    host = train("host", tmp_path / "host", resume=True)
    host = dataclasses.replace(host, records=first.records + host.records)
    assert [r["updates"] for r in dev.records] == [0, 0, 15, 15]
    _equal_runs(dev, host)
    trainer = make_trainer(make_plan(small_config(steps=160, replay_memory="host"), (0, 1)))
    index = ckpt.indices(tmp_path / "device")[-1]
    def state(run_dir):  # the checkpoint and the ring rebuilt from the replay files
        return load_state(trainer, str(run_dir), index, ckpt.read_meta(run_dir, index))

    a = state(tmp_path / "device")  # a device run's, in host memory
    b = state(tmp_path / "host")
    assert {x.sharding.memory_kind for x in jax.tree.leaves(a.replay.data)} == {HOST}
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.slow  # a 240-row run with each replay, three programs compiled
def test_a_host_replay_grows_on_resume_as_the_device_replay(tmp_path):
    """A host-replay run of 160 rows resumed to 240 rows, its ring sized by --steps (20 rows
    per env, then 30: restore_run grows it on the host and puts it back in pinned host
    memory), equals the 240-row run with a device replay: records and parameters."""
    def train(memory_kind, steps, out, **kw):
        cfg = small_config(steps=steps, replay_memory=memory_kind, replay_capacity=0)
        return driver.train(cfg, (0,), str(out), progress=False,
                            tensorboard=False, report=False, **kw)

    assert setup_lib.make_setup(small_config(steps=160, replay_capacity=0)).capacity == 20
    dev = train("device", 240, tmp_path / "device")
    first = train("host", 160, tmp_path / "host")
    host = train("host", 240, tmp_path / "host", resume=True)
    host = dataclasses.replace(host, records=first.records + host.records)
    assert [r["updates"] for r in dev.records] == [0, 15, 55]
    _equal_runs(dev, host)
    trainer = make_trainer(make_plan(small_config(steps=240, replay_memory="host",
                                                  replay_capacity=0), (0,)))
    index = ckpt.indices(tmp_path / "host")[-1]
    back = load_state(trainer, str(tmp_path / "host"), index,
                      ckpt.read_meta(tmp_path / "host", index))
    assert {x.sharding.memory_kind for x in jax.tree.leaves(back.replay.data)} == {HOST}
    assert back.replay.data["is_first"].shape == (1, 8, 30)  # seeds, envs, rows per env


@pytest.mark.slow  # two host-env runs, the host replay's programs compiled: ~3 min on 2 cores
def test_host_env_run_with_a_host_replay_equals_the_device_replays(tmp_path):
    pytest.importorskip("gymnasium")
    runs = [driver.train(small_config("gym_CartPole-v1", steps=160, replay_memory=m), (0, 1),
                         str(tmp_path / m), progress=False,
                         tensorboard=False) for m in ("device", "host")]
    assert [r["updates"] for r in runs[0].records] == [0, 0, 15, 15]
    _equal_runs(*runs)


DEVICES_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from _runs import small_config, without_timing
    from dreamerjax.run import driver
        out, res = sys.argv[1], {}
    for name, devices, extra in (("seeds", 2, {}), ("data", 1, {"train_devices": (0, 1)})):
        runs = [driver.train(small_config(steps=160, replay_memory=m, **extra), (0, 1),
                             f"{out}/{name}-{m}", devices=devices, progress=False,
                             tensorboard=False) for m in ("device", "host")]
        res[name] = [[without_timing(r) for r in run.records] for run in runs]
        res[name + "_params"] = all(np.array_equal(a, b) for a, b in zip(
            jax.tree.leaves(runs[0].params), jax.tree.leaves(runs[1].params)))
    print(json.dumps(res, default=str))
""")


@pytest.mark.slow
def test_host_replay_over_two_devices_equals_the_device_replay(tmp_path):
    """Seeds over 2 devices (--devices 2) and one seed's envs over 2 data devices
    (--data-devices 2), on two host devices: the host replay's records and parameters are
    the device replay's."""
    res = json_of_child(DEVICES_SCRIPT, tmp_path, Path(__file__).parent, devices=2)
    for name in ("seeds", "data"):
        device, host = res[name]
        assert [r["updates"] for r in device] == [0, 0, 15, 15]
        assert json.dumps(device) == json.dumps(host)
        assert res[name + "_params"]


# ----------------------------------------------------------------------------- memory


def test_replay_memory_is_validated_by_name():
    with pytest.raises(ConfigError, match=r"^run.replay_memory: 'disk'; choose one of device, "
                                          r"host$"):
        make_plan(small_config(replay_memory="disk"), (0,))


def test_a_host_replay_is_checked_against_host_memory(monkeypatch):
    setup = setup_lib.make_setup(small_config(replay_memory="host"))
    need = memory.replay_bytes(setup, 2)
    agents = 2 * memory.agent_bytes(setup)  # the device holds the agents, not the rows
    monkeypatch.setattr(memory, "available", lambda devices=1: (agents, "free on 1 gpu device(s)"))
    monkeypatch.setattr(memory, "host_available", lambda: need)
    assert memory.check_replay(setup, 2) == need
    monkeypatch.setattr(memory, "host_available", lambda: need - 1)
    with pytest.raises(MemoryError, match="in host memory .* does not fit: .* available host "
                                          "memory"):
        memory.check_replay(setup, 2)


def test_a_device_replay_that_does_not_fit_is_told_of_the_host(monkeypatch):
    setup = setup_lib.make_setup(small_config())
    need = memory.replay_bytes(setup, 1)
    monkeypatch.setattr(memory, "available", lambda devices=1: (need - 1, "free on 1 gpu "
                                                                "device(s)"))
    monkeypatch.setattr(memory, "host_available", lambda: 10 * need)
    with pytest.raises(MemoryError) as err:
        memory.check_replay(setup, 1)
    assert str(err.value).endswith("--set run.replay_memory=host")
    assert "\n" not in str(err.value)
    monkeypatch.setattr(memory, "host_available", lambda: need - 1)  # no room there either
    with pytest.raises(MemoryError) as err:
        memory.check_replay(setup, 1)
    assert "--set run.replay_memory=host" not in str(err.value)


def test_on_an_accelerator_a_host_replays_seeds_are_vmapped(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    setup = setup_lib.make_setup(small_config(replay_memory="host", seed_loop="map"))
    with pytest.raises(ValueError, match="run.replay_memory=host with run.seed_loop=map"):
        plan_lib.plan_of_setup(setup, (0, 1))
    auto = setup_lib.make_setup(small_config(replay_memory="host"))
    assert plan_lib.plan_of_setup(auto, (0, 1)).seed_loop == "vmap"


def test_info_says_where_the_replay_lives(capsys):
    from dreamerjax.tools import cli

    for where, words in (("device", "in device memory"), ("host", "in host memory")):
        assert cli.main(["info", "--tiny", "--set", f"run.replay_memory={where}"]) == 0
        (line,) = [x for x in capsys.readouterr().out.splitlines()
                   if x.startswith("replay: ")]
        assert words in line
    assert "available host memory" in line
