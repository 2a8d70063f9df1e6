"""Row collector contract (protocol 2.1 / 2.2 port self-test, on gymnax itself)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dreamerjax import envs


def _cartpole_state(spec, key, **fields):
    """A collector state whose CartPole env state is forced to `fields`."""
    state, _ = envs.collector_init(spec, key)
    env_state = state.env_state.replace(
        **{k: jnp.asarray(v, jnp.asarray(getattr(state.env_state, k)).dtype)
           for k, v in fields.items()})
    return state.replace(env_state=env_state)


def _rollout(spec, key, steps, action_fn):
    def body(state, inp):
        t, k = inp
        k_act, k_env = jax.random.split(k)
        state, row, end = envs.collector_step(spec, state, action_fn(t, k_act), k_env)
        return state, (row, end)

    state, first = envs.collector_init(spec, key)
    keys = jax.random.split(jax.random.fold_in(key, 1), steps)
    _, (rows, ends) = jax.jit(lambda s: jax.lax.scan(body, s, (jnp.arange(steps), keys)))(
        state)
    rows = {k: np.concatenate([np.asarray(first[k])[None], np.asarray(v)]) for k, v in
            rows.items()}
    ends = jax.tree.map(lambda x: np.concatenate([np.zeros_like(x[:1]), x]), ends)
    return rows, ends


def test_unknown_id_lists_known_ids():
    with pytest.raises(ValueError, match="CartPole-v1"):
        envs.make_env("CartPole-v0")


def test_spec_facts():
    spec = envs.make_env("CartPole-v1")
    assert spec is envs.make_env("CartPole-v1")
    assert spec.obs_shape == (4,)
    assert spec.discrete and spec.num_actions == 2 and spec.action_shape == ()
    assert spec.episode_limit == 500
    assert envs.make_env("CartPole-v1", episode_limit=7).episode_limit == 7
    pend = envs.make_env("Pendulum-v1")
    assert not pend.discrete and pend.action_shape == (1,)
    assert pend.action_low == (-2.0,) and pend.action_high == (2.0,)
    assert pend.episode_limit == 200
    assert len(envs.make_env("Breakout-MinAtar").obs_shape) == 3  # [H, W, C]


def test_forced_truncation_is_last_not_terminal():
    spec = envs.make_env("CartPole-v1")
    key = jax.random.PRNGKey(0)
    state = _cartpole_state(spec, key, x=0.0, x_dot=0.0, theta=0.0, theta_dot=0.0, time=499)
    state, row, end = envs.collector_step(spec, state, jnp.int32(1), key)
    assert bool(row["is_last"]) and not bool(row["is_terminal"])
    assert not bool(row["is_first"]) and float(row["reward"]) == 1.0
    assert bool(end.ended) and not bool(end.terminal)


def test_forced_termination_is_terminal():
    spec = envs.make_env("CartPole-v1")
    key = jax.random.PRNGKey(0)
    # theta 0.2 + tau * 2.0 = 0.24 > 12 degrees (0.2094) after one step.
    state = _cartpole_state(spec, key, x=0.0, x_dot=0.0, theta=0.2, theta_dot=2.0, time=3)
    state, row, end = envs.collector_step(spec, state, jnp.int32(0), key)
    assert bool(row["is_last"]) and bool(row["is_terminal"])
    assert bool(end.ended) and bool(end.terminal)
    # One step short of the threshold: not terminal, not last.
    state = _cartpole_state(spec, key, x=0.0, x_dot=0.0, theta=0.1, theta_dot=0.0, time=3)
    _, row, end = envs.collector_step(spec, state, jnp.int32(0), key)
    assert not bool(row["is_last"]) and not bool(row["is_terminal"]) and not bool(end.ended)


def test_held_on_is_last_then_reset_row_ignores_action():
    spec = envs.make_env("CartPole-v1")
    key = jax.random.PRNGKey(3)
    state = _cartpole_state(spec, key, x=0.0, x_dot=0.0, theta=0.2, theta_dot=2.0, time=3)
    state, row, _ = envs.collector_step(spec, state, jnp.int32(0), key)
    assert bool(row["is_last"])
    k = jax.random.PRNGKey(11)
    s0, r0, e0 = envs.collector_step(spec, state, jnp.int32(0), k)
    s1, r1, e1 = envs.collector_step(spec, state, jnp.int32(1), k)
    for r in (r0, r1):
        assert bool(r["is_first"]) and not bool(r["is_last"]) and not bool(r["is_terminal"])
        assert float(r["reward"]) == 0.0
        assert np.all(np.abs(np.asarray(r["obs"])) <= 0.05)
    np.testing.assert_array_equal(r0["obs"], r1["obs"])
    assert not bool(e0.ended)
    assert int(s0.env_state.time) == 0 and int(s0.length) == 0 and float(s0.score) == 0.0
    # The next call steps the fresh episode.
    _, r2, _ = envs.collector_step(spec, s0, jnp.int32(1), k)
    assert not bool(r2["is_first"]) and float(r2["reward"]) == 1.0


def test_episode_rows_structure():
    spec = envs.make_env("CartPole-v1")
    rows, ends = _rollout(spec, jax.random.PRNGKey(5), 800,
                          lambda t, k: jax.random.randint(k, (), 0, 2))
    first, last, term = rows["is_first"], rows["is_last"], rows["is_terminal"]
    assert first[0] and np.all(rows["reward"][first] == 0.0)
    assert np.all(rows["reward"][~first] == 1.0)
    assert not np.any(first & last) and np.all(term <= last)
    # Every is_last row is followed by an is_first row and vice versa.
    np.testing.assert_array_equal(first[1:], last[:-1])
    starts = np.flatnonzero(first)
    stops = np.flatnonzero(last)
    assert len(stops) >= 10
    for s, e in zip(starts[: len(stops)], stops, strict=True):
        length = e - s  # L steps -> L + 1 rows s..e
        assert ends.ended[e] and ends.length[e] == length and ends.score[e] == length
        assert not np.any(last[s:e])
    assert np.sum(ends.ended) == len(stops)
    # Random CartPole episodes end by falling, never by the 500-step limit.
    np.testing.assert_array_equal(term[last], True)


def test_episode_limit_truncation_in_rollout():
    spec = envs.make_env("CartPole-v1", episode_limit=10)
    rows, ends = _rollout(spec, jax.random.PRNGKey(1), 40, lambda t, k: (t % 2).astype(jnp.int32))
    # Alternating pushes keep the pole up: every episode is cut at 10 steps (11 rows).
    np.testing.assert_array_equal(np.flatnonzero(rows["is_last"]), [10, 21, 32])
    assert not np.any(rows["is_terminal"])
    np.testing.assert_array_equal(ends.length[rows["is_last"]], 10)
    np.testing.assert_array_equal(ends.terminal[rows["is_last"]], False)


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Breakout-MinAtar"])
def test_other_envs_row_shapes(env_id):
    spec = envs.make_env(env_id)
    if spec.discrete:
        act = lambda t, k: jax.random.randint(k, (), 0, spec.num_actions)  # noqa: E731
    else:
        act = lambda t, k: jax.random.uniform(k, spec.action_shape, minval=-1, maxval=1)  # noqa: E731
    rows, ends = _rollout(spec, jax.random.PRNGKey(2), 250, act)
    assert rows["obs"].shape == (251, *spec.obs_shape) and rows["obs"].dtype == np.float32
    for k in ("reward",):
        assert rows[k].shape == (251,) and rows[k].dtype == np.float32
    for k in ("is_first", "is_last", "is_terminal"):
        assert rows[k].shape == (251,) and rows[k].dtype == bool
    if env_id == "Pendulum-v1":
        # 200-step limit, never terminal: rows 200 and 201 are is_last and reset.
        assert np.flatnonzero(rows["is_last"]).tolist() == [200]
        assert rows["is_first"][201] and not rows["is_terminal"].any()


def test_continuous_action_mapping():
    spec = envs.make_env("Pendulum-v1")
    out = jax.vmap(lambda a: envs.to_env_action(spec, a))(
        jnp.array([[-1.0], [0.0], [1.0], [5.0]]))
    np.testing.assert_allclose(np.asarray(out).ravel(), [-2.0, 0.0, 2.0, 2.0])


def test_replay_row_zeroes_action_on_is_last():
    row = dict(obs=jnp.zeros((3, 4)), reward=jnp.zeros(3), is_first=jnp.zeros(3, bool),
               is_last=jnp.array([False, True, False]), is_terminal=jnp.zeros(3, bool))
    out = envs.replay_row(row, jnp.array([1, 1, 1], jnp.int32), jnp.ones((3, 8)),
                          jnp.ones((3, 2), jnp.int32))
    np.testing.assert_array_equal(out["action"], [1, 0, 1])
    out = envs.replay_row(row, jnp.ones((3, 2)), jnp.ones((3, 8)), jnp.ones((3, 2), jnp.int32))
    np.testing.assert_array_equal(out["action"], [[1, 1], [0, 0], [1, 1]])
    assert out["deter"].dtype == jnp.float32 and out["stoch"].dtype == jnp.int32


# ----------------------------------------------------------------------------- ids, suites


def test_env_ids_suite_task_and_bare_gymnax():
    spec = envs.make_env("gymnax_CartPole-v1")
    assert (spec.suite, spec.task, spec.env_id) == ("gymnax", "CartPole-v1", "gymnax_CartPole-v1")
    bare = envs.make_env("CartPole-v1")
    assert (bare.suite, bare.task) == ("gymnax", "CartPole-v1")
    assert bare.obs_space == spec.obs_space == (("vector", (4,), "float32"),)
    # Split at the first underscore only (dreamerv3/main.py:192).
    suite, task = envs.parse_env_id("craftax_Craftax-Classic-Symbolic-v1")
    assert (suite.name, task) == ("craftax", "Craftax-Classic-Symbolic-v1")
    assert envs.parse_env_id("gymnax_x_y")[1] == "x_y"


@pytest.mark.parametrize("env_id, match", [
    ("nosuch_Task", "unknown suite 'nosuch'.*gymnax, craftax, playground, brax"),
    ("gymnax_", "no task after the suite prefix"),
    ("gymnax_CartPole-v0", "unknown gymnax env 'CartPole-v0'.*CartPole-v1"),
    ("", "expected SUITE_TASK"),
])
def test_env_id_errors(env_id, match):
    with pytest.raises(ValueError, match=match):
        envs.make_env(env_id)


def test_missing_extra_names_install_command():
    suite = envs.Suite("nopkg", "dreamerjax.envs.nopkg", ("dreamerjax_no_such_package",),
                       extra="nopkg")
    assert not suite.installed() and suite.missing() == ("dreamerjax_no_such_package",)
    with pytest.raises(envs.MissingExtra, match=r"nopkg_x.*pip install -e '\.\[nopkg\]'"):
        suite.load("nopkg_x")
    assert issubclass(envs.MissingExtra, ValueError)  # the CLI prints it as one line


def test_describe_lists_every_suite():
    text = envs.registry.describe()
    for name, suite in envs.SUITES.items():
        line = next(ln for ln in text.splitlines() if ln.startswith(name + " "))
        assert ("not installed" not in line) if suite.installed() else (suite.install in line)


def test_register_refuses_duplicates_and_underscores():
    with pytest.raises(ValueError, match="already registered"):
        envs.register(envs.Suite("gymnax", "x", ()))
    with pytest.raises(ValueError, match="no underscore"):
        envs.register(envs.Suite("a_b", "x", ()))


def test_every_gymnax_id_builds_or_is_refused_with_its_reason():
    """Not a whitelist: every registered gymnax id either builds into a spec the agent
    can take, or is refused naming why (MNISTBandit downloads MNIST when built)."""
    import gymnax
    built = []
    for task in gymnax.registered_envs:
        try:
            spec = envs.make_env(f"gymnax_{task}")
        except ValueError as e:
            assert task in str(e) and "cannot be built here" in str(e), str(e)
            continue
        built.append(task)
        ((name, shape, dtype),) = spec.obs_space
        assert (name, len(shape)) in (("vector", 1), ("image", 3)), (task, spec.obs_space)
        assert dtype == ("uint8" if task.endswith("-MinAtar") else "float32")
        assert spec.episode_limit > 0
        assert (spec.num_actions >= 2) if spec.discrete else (spec.action_dims >= 1)
    assert len(built) >= len(gymnax.registered_envs) - 1


@pytest.mark.parametrize("env_id, obs_shape", [
    ("gymnax_FrozenLake-misc", (16,)),  # Discrete observation -> one-hot
    ("gymnax_Catch-bsuite", (50,)),  # a 10 x 5 grid -> flat vector
    ("gymnax_PointRobot-misc", (6,)),  # continuous actions
])
def test_other_gymnax_families_roll_out(env_id, obs_shape):
    spec = envs.make_env(env_id)
    assert spec.obs_shape == obs_shape
    if spec.discrete:
        act = lambda t, k: jax.random.randint(k, (), 0, spec.num_actions)  # noqa: E731
    else:
        act = lambda t, k: jax.random.uniform(k, spec.action_shape, minval=-1, maxval=1)  # noqa: E731
    rows, ends = _rollout(spec, jax.random.PRNGKey(4), 120, act)
    assert rows["obs"].shape == (121, *obs_shape) and np.isfinite(rows["obs"]).all()
    np.testing.assert_array_equal(rows["is_first"][1:], rows["is_last"][:-1])
    if env_id == "gymnax_FrozenLake-misc":
        np.testing.assert_array_equal(rows["obs"].sum(-1), 1.0)


# ----------------------------------------------------------------------------- dict rows


def _row_matches_spec(row, spec):
    want = envs.row_spec(spec)
    assert jax.tree.structure(row) == jax.tree.structure(want)
    for got, sd in zip(jax.tree.leaves(row), jax.tree.leaves(want), strict=True):
        assert got.shape == sd.shape and got.dtype == sd.dtype, (got.shape, got.dtype, sd)


def test_dict_obs_minatar_uint8_and_legacy_float_agree():
    spec = envs.make_env("gymnax_Breakout-MinAtar", dict_obs=True)
    legacy = envs.make_env("gymnax_Breakout-MinAtar")
    assert spec is not legacy and spec.dict_obs and not legacy.dict_obs
    assert spec.obs_space == (("image", (10, 10, 4), "uint8"),)
    key = jax.random.PRNGKey(9)
    state, row = envs.collector_init(spec, key)
    _, old_row = envs.collector_init(legacy, key)
    _row_matches_spec(row, spec)
    _row_matches_spec(old_row, legacy)
    image = np.asarray(row["obs"]["image"])
    assert set(np.unique(image)) <= {0, 255} and image.max() == 255
    # The agent's /255 (agent.py:469-470) gives back gymnax's 0/1 floats exactly.
    np.testing.assert_array_equal(image.astype(np.float32) / 255.0, old_row["obs"])
    state, row, _ = jax.jit(lambda s, a, k: envs.collector_step(spec, s, a, k))(
        state, jnp.int32(1), key)
    _row_matches_spec(row, spec)


def test_dict_obs_vector_rows_and_replay_row():
    spec = envs.make_env("CartPole-v1", dict_obs=True)
    state, row = envs.collector_init(spec, jax.random.PRNGKey(0))
    _row_matches_spec(row, spec)
    assert list(row["obs"]) == ["vector"] and row["obs"]["vector"].dtype == jnp.float32
    stored = envs.replay_row(row, jnp.int32(1), jnp.zeros(8), jnp.zeros(2, jnp.int32))
    assert stored["obs"]["vector"].shape == (4,) and int(stored["action"]) == 1


def test_spaces_of_builds_agent_spaces():
    spaces = envs.spaces_of(envs.make_env("Breakout-MinAtar", dict_obs=True))
    assert spaces.obs == (("image", (10, 10, 4), "uint8"),)
    assert spaces.act_discrete and spaces.act_dim == 3
    # A single-array spec's Spaces say what its rows carry: float32 (uint8 / 255).
    assert envs.spaces_of(envs.make_env("Breakout-MinAtar")).obs == (
        ("image", (10, 10, 4), "float32"),)
    pend = envs.spaces_of(envs.make_env("Pendulum-v1", dict_obs=True), "vector", "vector")
    assert not pend.act_discrete and pend.act_dim == 1 and pend.enc_spaces == "vector"


def test_action_bounds_round_trip():
    spec = envs.make_env("gymnax_Pendulum-v1")  # bounds [-2, 2]
    a = jnp.linspace(-1.0, 1.0, 9)[:, None]
    env_a = jax.vmap(lambda x: envs.to_env_action(spec, x))(a)
    assert float(env_a.min()) == spec.action_low[0] and float(env_a.max()) == spec.action_high[0]
    back = jax.vmap(lambda x: envs.from_env_action(spec, x))(env_a)
    np.testing.assert_allclose(back, a, atol=1e-6)


def test_suite_options_from_a_config_section():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Craftax:
        size: list = dataclasses.field(default_factory=lambda: [32, 48])

    @dataclasses.dataclass(frozen=True)
    class Env:
        craftax: Craftax = dataclasses.field(default_factory=Craftax)

    assert envs.suite_options(Env(), "craftax_Craftax-Classic-Pixels-v1") == {"size": (32, 48)}
    assert envs.suite_options(Env(), "CartPole-v1") == {}


def test_envs_command_lists_suites(capsys):
    from dreamerjax.tools import cli
    assert cli.main(["envs"]) == 0
    out = capsys.readouterr().out
    for name in ("gymnax", "craftax", "playground", "brax"):
        assert any(line.startswith(name + " ") for line in out.splitlines())
    assert cli.main(["envs", "--json"]) == 0
    import json
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["suite"] for r in rows} >= {"gymnax", "craftax", "playground", "brax"}
    assert all(r["installed"] or r["install"].startswith("pip install") for r in rows)
