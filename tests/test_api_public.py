"""The notebook API's run half: a plain function as a callback, `evaluate` on a run
directory and on a TrainResult, `load_config` of a run, `register_env` for a JAX env and
a Gymnasium one (again under the same name), the command line evaluating a run of an env a
module registers (the module the run recorded, or `--import`), and `cli_settings`
returning train's process options."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from _corridor import Corridor
from _runs import small_config

import dreamerjax
from dreamerjax.envs import registry
from dreamerjax.run import checkpoint as ckpt
from dreamerjax.run import precompile, records, rundir
from dreamerjax.tools import cli

SEEDS = (0, 3)


def test_public_names():
    names = dir(dreamerjax)
    for name in ("evaluate", "load_config", "register_env", "JaxEnv", "cli_settings",
                 "Settings", "train", "make_config", "load_policy", "Callback", "LogPoint"):
        assert name in names and name in dreamerjax.__all__, name
        assert getattr(dreamerjax, name) is not None


@pytest.fixture(scope="module")
def run_with_function_callback(tmp_path_factory):
    out = tmp_path_factory.mktemp("api_public") / "run"
    seen = []
    result = dreamerjax.train(small_config(steps=160), SEEDS, str(out), progress=False,
                              callbacks=[lambda point: seen.append(
                                  (point.rows, [r["seed"] for r in point.records]))])
    return out, result, seen


def test_a_plain_function_is_called_at_each_log_point(run_with_function_callback):
    out, result, seen = run_with_function_callback
    assert seen == [(80, list(SEEDS)), (160, list(SEEDS))]
    assert [r["rows"] for r in result.records] == [80, 80, 160, 160]


def test_callbacks_that_are_not_functions_are_refused_before_building(tmp_path):
    with pytest.raises(TypeError, match=r"callbacks\[1\]"):
        dreamerjax.train(small_config(), (0,), str(tmp_path / "x"), progress=False,
                         callbacks=[print, 3])
    assert not (tmp_path / "x").exists()


def test_load_config_is_the_runs_config(run_with_function_callback):
    out, result, _ = run_with_function_callback
    config = dreamerjax.load_config(out)
    assert config == result.config == records.read_run_config(str(out))[0]
    with pytest.raises(ValueError, match="config.json"):
        dreamerjax.load_config(out.parent / "missing")


def test_evaluate_a_run_directory_and_a_result(run_with_function_callback):
    out, result, _ = run_with_function_callback
    from_dir = dreamerjax.evaluate(out, episodes=3)
    assert [row["seed"] for row in from_dir] == list(SEEDS)
    for row in from_dir:
        assert len(row["returns"]) == len(row["lengths"]) == 3
        assert row["mean"] == pytest.approx(float(np.mean(row["returns"])))
        assert all(n >= 1 for n in row["lengths"])
        assert row["returns"] == [float(n) for n in row["lengths"]]  # CartPole: 1 per step
    # `dreamerjax eval`'s numbers for the same run and episodes
    cli_rows = rundir.evaluate_run(str(out), 3)
    assert [(r["seed"], r["returns"]) for r in cli_rows] == [
        (r["seed"], r["returns"]) for r in from_dir]
    # the result's parameters are the checkpoint's: the same episodes, one seed alone too
    assert [r["returns"] for r in dreamerjax.evaluate(result, episodes=3)] == [
        r["returns"] for r in from_dir]
    only = dreamerjax.evaluate(result, episodes=3, seed=3)  # seed 3 alone, its own keys
    assert [r["seed"] for r in only] == [3] and len(only[0]["returns"]) == 3
    with pytest.raises(ValueError, match="seed 5 was not trained"):
        dreamerjax.evaluate(out, seed=5)
    with pytest.raises(ValueError, match="episodes"):
        dreamerjax.evaluate(out, episodes=0)


def test_evaluate_writes_a_video(run_with_function_callback, tmp_path):
    pytest.importorskip("imageio")
    _, result, _ = run_with_function_callback
    video = tmp_path / "episode.gif"
    rows = dreamerjax.evaluate(result, episodes=1, seed=0, video=video)
    assert rows[0]["video"] == str(video) and video.stat().st_size > 0


def _files(root):
    return sorted(root.rglob("*"))


def test_evaluate_an_exported_policy_file(run_with_function_callback, tmp_path, capsys):
    from dreamerjax.run.policy import export

    out, _, _ = run_with_function_callback
    path = export(out, 3, tmp_path / "cartpole.npz")
    # The file's params are seed 3's of the latest checkpoint: `dreamerjax eval` of the
    # run directory gives the same episodes for that seed, through the API and the CLI.
    want = [{k: r[k] for k in ("seed", "returns", "mean", "lengths")}
            for r in rundir.evaluate_run(str(out), 3) if r["seed"] == 3]
    rows = dreamerjax.evaluate(str(path), episodes=3)
    assert rows == want  # the keys of `dreamerjax eval`, the episodes' lengths as ints
    assert all(type(n) is int for n in rows[0]["lengths"])
    assert rows[0]["returns"] == [float(n) for n in rows[0]["lengths"]]  # 1 per step
    assert dreamerjax.evaluate(path, episodes=3, seed=3, mode="mode")[0]["seed"] == 3
    assert cli.main(["eval", str(path), "--episodes", "3"]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == want
    with pytest.raises(ValueError, match="holds seed 3 alone, not seed 0"):
        dreamerjax.evaluate(path, seed=0)
    with pytest.raises(ValueError, match="checkpoint 1: .* is a policy file"):
        dreamerjax.evaluate(path, checkpoint=1)
    # What a file lacks is refused in one line naming the flag; nothing is written.
    before = _files(tmp_path)
    for flags, flag in ((["--report"], "--report"), (["--checkpoint", "1"], "--checkpoint"),
                        (["--plot", str(tmp_path / "c.png")], "--plot")):
        assert cli.main(["eval", str(path), *flags]) == 2
        err = capsys.readouterr().err
        assert f"error: {flag}: " in err and "policy file" in err, err
        assert len(err.strip().splitlines()) == 1
    assert _files(tmp_path) == before
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    before = _files(tmp_path)
    assert cli.main(["eval", str(tmp_path / "other.npz")]) == 2
    err = capsys.readouterr().err
    assert "not a dreamerjax policy file: " in err and len(err.strip().splitlines()) == 1
    assert _files(tmp_path) == before


def test_eval_of_a_policy_file_writes_a_video(run_with_function_callback, tmp_path,
                                              capsys):
    pytest.importorskip("imageio")
    from dreamerjax.run.policy import export

    out, _, _ = run_with_function_callback
    path = export(out, 0, tmp_path / "cartpole.npz")
    video = tmp_path / "episode.gif"
    assert cli.main(["eval", str(path), "--episodes", "1", "--video", str(video)]) == 0
    assert f"wrote {video}" in capsys.readouterr().out and video.stat().st_size > 0


def test_register_env_jax_checks_and_replaces():
    from dreamerjax.envs import core

    try:
        assert dreamerjax.register_env("apicorridor_walk", Corridor()) == "apicorridor_walk"
        spec = core.make_env("apicorridor_walk")
        assert (spec.discrete, spec.num_actions, spec.episode_limit) == (True, 2, 30)
        assert spec.obs_space == (("vector", (1,), "float32"),)

        class Longer(Corridor):
            episode_limit = 60

        # registering the same name again replaces it (a notebook cell run twice)
        assert dreamerjax.register_env("apicorridor_walk", Longer()) == "apicorridor_walk"
        assert core.make_env("apicorridor_walk").episode_limit == 60
        dreamerjax.register_env("apicorridor_run", Longer)  # a second task; a class
        assert core.make_env("apicorridor_run").episode_limit == 60
        assert core.make_env("apicorridor_walk").episode_limit == 60
    finally:
        registry.SUITES.pop("apicorridor", None)
        core.make_env.cache_clear()
    with pytest.raises(ValueError, match="built-in suite"):
        dreamerjax.register_env("gymnax_Mine-v0", Corridor())
    with pytest.raises(ValueError, match="SUITE_TASK"):
        dreamerjax.register_env("corridor", Corridor())

    class NoLimit(Corridor):
        episode_limit = 0

    with pytest.raises(ValueError, match="episode_limit"):
        dreamerjax.register_env("apicorridor_walk", NoLimit())
    assert "apicorridor" not in registry.SUITES


def test_register_env_gymnasium_id_and_factory_again():
    gymnasium = pytest.importorskip("gymnasium")
    assert dreamerjax.register_env("CartPole-v1", "CartPole-v1") == "gym_CartPole-v1"
    env_id = dreamerjax.register_env("ApiLongCartPole-v1", "CartPole-v1",
                                     max_episode_steps=700)
    assert env_id == "gym_ApiLongCartPole-v1"
    assert gymnasium.spec("ApiLongCartPole-v1").max_episode_steps == 700
    again = dreamerjax.register_env("ApiLongCartPole-v1", "CartPole-v1",
                                    max_episode_steps=800)
    assert again == env_id and gymnasium.spec("ApiLongCartPole-v1").max_episode_steps == 800
    env = gymnasium.make("ApiLongCartPole-v1")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4,)
    with pytest.raises(gymnasium.error.Error):
        dreamerjax.register_env("NoSuchEnv-v9", "NoSuchEnv-v9")


MODULE = '''
import dreamerjax
from _corridor import Corridor

dreamerjax.register_env("importedcorridor_walk", Corridor())
'''


def _forget(module: str, suite: str) -> None:
    """As a fresh process: no such suite and the module not imported."""
    from dreamerjax.envs import core

    registry.SUITES.pop(suite, None)
    core.make_env.cache_clear()
    sys.modules.pop(module, None)


def test_cli_evaluates_a_run_of_an_env_a_module_registers(tmp_path, monkeypatch, capsys):
    (tmp_path / "api_corridor_envs.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    try:
        import api_corridor_envs  # noqa: F401  (registers importedcorridor_walk)

        dreamerjax.train(small_config("importedcorridor_walk", steps=80), (0,), str(out),
                         progress=False, report=False)
        saved = json.loads((out / "config.json").read_text())
        assert saved["env_modules"] == ["api_corridor_envs"]
        # A fresh command-line process imports the module the run recorded.
        _forget("api_corridor_envs", "importedcorridor")
        assert cli.main(["eval", str(out), "--episodes", "2"]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        assert row["seed"] == 0 and len(row["returns"]) == 2
        assert "api_corridor_envs" in sys.modules
        # Registered from a script (nothing recorded): only --import finds it.
        saved.pop("env_modules")
        (out / "config.json").write_text(json.dumps(saved))
        _forget("api_corridor_envs", "importedcorridor")
        assert cli.main(["eval", str(out), "--episodes", "2"]) == 2
        err = capsys.readouterr().err
        assert "importedcorridor" in err and "--import MODULE" in err
        assert cli.main(["eval", str(out), "--episodes", "2",
                         "--import", "api_corridor_envs"]) == 0
        assert cli.main(["eval", str(out), "--import", "no_such_module_here"]) == 2
        assert "--import no_such_module_here" in capsys.readouterr().err
        # Registered by a script or notebook (recorded as such): the fix is named at once.
        (out / "config.json").write_text(json.dumps(saved | {"env_registered_in_script": True}))
        _forget("api_corridor_envs", "importedcorridor")
        registry.REGISTERED_BY.pop("importedcorridor_walk", None)
        assert cli.main(["eval", str(out), "--episodes", "2"]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"dreamerjax eval: error: {out / 'config.json'}: the run's env "
                       "'importedcorridor_walk' was registered with dreamerjax.register_env "
                       "in a script or notebook, which this process has not run: pass "
                       "--import MODULE (a module that registers it) or call "
                       "dreamerjax.register_env first")
        with pytest.raises(ValueError, match="in a script or notebook, which this process"):
            dreamerjax.load_policy(str(out))
        assert cli.main(["eval", str(out), "--episodes", "2",
                         "--import", "api_corridor_envs"]) == 0
        # A recorded module that is gone is named, and the env error says what to do.
        (out / "config.json").write_text(json.dumps(saved | {"env_modules": ["gone_envs"]}))
        _forget("api_corridor_envs", "importedcorridor")
        assert cli.main(["eval", str(out), "--episodes", "2"]) == 2
        err = capsys.readouterr().err
        assert "'gone_envs'" in err and "--import MODULE" in err
    finally:
        _forget("api_corridor_envs", "importedcorridor")


def test_an_env_registered_by_a_script_records_no_module():
    from dreamerjax.envs import core

    namespace = {"__name__": "__main__", "dreamerjax": dreamerjax}
    exec(MODULE.replace("importedcorridor_walk", "scriptcorridor_walk"), namespace)
    try:
        assert registry.REGISTERED_BY["scriptcorridor_walk"] == "__main__"
        assert registry.registering_modules("scriptcorridor_walk") == ()
        assert registry.registering_modules("CartPole-v1") == ()
        # ... but that a script did, so that a fresh process can say what to do
        config = small_config("scriptcorridor_walk")
        assert records.config_file(config, (0,))["env_registered_in_script"] is True
        assert "env_registered_in_script" not in records.config_file(small_config(), (0,))
    finally:
        registry.SUITES.pop("scriptcorridor", None)
        registry.REGISTERED_BY.pop("scriptcorridor_walk", None)
        core.make_env.cache_clear()


def test_cli_settings_are_trains_settings():
    import dataclasses
    import inspect

    settings = dreamerjax.cli_settings(xla_tuning=False)
    assert isinstance(settings, dreamerjax.Settings)
    assert inspect.signature(dreamerjax.train).parameters["settings"].default is None
    assert settings.compile_cache == precompile.default_compile_cache_dir()
    assert settings.precompile and settings.malloc_trim and settings.stop is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.precompile = False


def test_train_leaves_the_compile_cache_alone_unless_given_one(tmp_path):
    import inspect

    import jax

    assert inspect.signature(dreamerjax.train).parameters["settings"].default is None
    assert dreamerjax.Settings().compile_cache is None  # train's default Settings
    before = jax.config.jax_compilation_cache_dir
    try:
        precompile.enable_compile_cache(None)
        precompile.enable_compile_cache(False)
        assert jax.config.jax_compilation_cache_dir == before
        precompile.enable_compile_cache(tmp_path / "cache")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache")
        assert (tmp_path / "cache").is_dir()
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_evaluate_any_kept_checkpoint_from_python_and_the_cli(run_with_function_callback,
                                                              tmp_path, capsys):
    """A chosen checkpoint, `all` (one evaluation per kept checkpoint, oldest first) and a
    RUN/checkpoints/K path give the same rows from Python and from `dreamerjax eval`; a
    checkpoint that is not kept is refused in one line naming the kept ones; the run
    directory is left as it was."""
    out, _result, _ = run_with_function_callback
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*"))
    assert ckpt.indices(out) == [0, 1]  # log points at rows 80 and 160
    every = dreamerjax.evaluate(out, episodes=2, checkpoint="all")
    assert [(r["checkpoint"], r["rows"], r["updates"], r["seed"]) for r in every] == [
        (0, 80, 0, 0), (0, 80, 0, 3), (1, 160, 15, 0), (1, 160, 15, 3)]
    first = dreamerjax.evaluate(out / "checkpoints" / "0", episodes=2)
    assert [r["returns"] for r in first] == [r["returns"] for r in every[:2]]
    latest = dreamerjax.evaluate(out, episodes=2)
    assert [r["returns"] for r in latest] == [r["returns"] for r in every[2:]]
    with pytest.raises(ValueError, match=r"checkpoint 7: not kept .*kept: 0, 1"):
        dreamerjax.evaluate(out, checkpoint=7)
    png = tmp_path / "over_checkpoints.png"
    assert cli.main(["eval", str(out), "--checkpoint", "all", "--episodes", "2",
                     "--plot", str(png)]) == 0
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert printed == every  # the same keys and numbers, the lengths as ints
    assert all(type(n) is int for r in every for n in r["lengths"])
    assert [r["lengths"] for r in dreamerjax.evaluate(_result, episodes=2)] == [
        r["lengths"] for r in every[2:]]  # the result's params, in memory
    assert png.stat().st_size > 10_000
    assert cli.main(["eval", str(out / "checkpoints" / "0"), "--episodes", "2"]) == 0
    assert [json.loads(x)["returns"] for x in capsys.readouterr().out.splitlines()] == [
        r["returns"] for r in first]
    assert cli.main(["eval", str(out), "--checkpoint", "9"]) == 2
    err = capsys.readouterr().err
    assert "--checkpoint 9: not kept" in err and "kept: 0, 1" in err
    assert sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in out.rglob("*")) == before
