"""The package as a Python user calls it: `dreamerjax.train` refuses a used directory
before building anything, returns a result whose policy acts in memory as the checkpoint's
does; `make_config` resolves as the command line; `import dreamerjax` lists its public
names without importing JAX."""

import re
import subprocess
import sys

import jax
import numpy as np
import pytest
from _runs import small_config

import dreamerjax
from dreamerjax.run import driver, guard, records, result, rundir
from dreamerjax.run import lock as runlock
from dreamerjax.run import plan as plan_lib
from dreamerjax.run.policy import PolicyError
from dreamerjax.tools import args as cli_args

# Two seeds, the second's value not its index (as tests/test_policy.py): the shared small
# run's two-seed program (tests/_runs.py), to row 160, the first log point with updates.
SEEDS = (0, 3)


def _snapshot(root):
    """Every file under root: {relative path: (bytes, mtime_ns)}."""
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_train_refuses_a_used_directory_before_building_anything(tmp_path, monkeypatch):
    """A second run into a directory would append to its records, overwrite its config and
    fail at its first checkpoint: refused in one line naming it, the directory untouched."""
    out = tmp_path / "used"
    (out / "checkpoints").mkdir(parents=True)
    (out / "records.jsonl").write_text('{"seed": 0, "rows": 80}\n')
    (out / "config.json").write_text("{}\n")
    before = _snapshot(out)

    def no_plan(*args, **kwargs):
        raise AssertionError("a plan was made (its setup built) for a used directory")

    monkeypatch.setattr(driver.plan_lib, "make_plan", no_plan)
    with pytest.raises(runlock.RunDirNotEmpty) as err:
        dreamerjax.train(small_config(), (0,), str(out), progress=False)
    message = str(err.value)
    assert message == (f"out {out} exists and is not empty; continue that run with "
                       "resume=True, or choose another out")
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == [
        "checkpoints", "config.json", "records.jsonl"]  # no lock file left either

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(runlock.RunDirNotEmpty, match="exists and is not a directory"):
        dreamerjax.train(small_config(), (0,), str(a_file), progress=False)
    assert a_file.read_text() == "x"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    result = dreamerjax.train(small_config(steps=160), SEEDS, str(out), progress=False)
    return out, result


def _obs(spaces, batch: int, seed: int = 0) -> dict:
    """A batch of observations of the run's spaces: {key: [batch, *shape]}, is_first."""
    rng = np.random.default_rng(seed)
    obs = {name: rng.normal(size=(batch, *shape)).astype(dtype)
           for name, (shape, dtype) in spaces.obs_dict().items()}
    return obs | {"is_first": np.array([True, False, True])[:batch]}


def test_result_policy_acts_in_memory_as_the_checkpoint_does(tiny_run):
    out, result = tiny_run
    assert isinstance(result, dreamerjax.TrainResult)
    # records: the list train returned before, as written to records.jsonl
    assert [(r["seed"], r["rows"], r["updates"]) for r in result.records] == [
        (0, 80, 0), (3, 80, 0), (0, 160, 15), (3, 160, 15)]
    assert result.records == records.read_records(out)
    assert sorted(result.params) == list(SEEDS) and result.seeds == SEEDS
    obs = _obs(result.spaces, 3)
    for seed in SEEDS:
        disk = dreamerjax.load_policy(out, seed=seed)
        # the final params are the last log point's checkpoint's, array for array
        jax.tree.map(np.testing.assert_array_equal, result.params[seed], disk.params)
        action, state = result.policy(obs, seed=seed)
        want, want_state = disk.act(obs, disk.init(3))
        assert action.shape == (3,)
        np.testing.assert_array_equal(action, want)
        # the returned state continues the episodes as the loaded policy's does
        np.testing.assert_array_equal(result.policy(obs, seed=seed, state=state)[0],
                                      disk.act(obs, want_state)[0])
        key = jax.random.PRNGKey(11)
        np.testing.assert_array_equal(
            result.policy(obs, seed=seed, key=key, mode="mode")[0],
            disk.act(obs, disk.init(3), key=key, mode="mode")[0])
    assert result.make_policy().seed == SEEDS[0]  # the default: the first seed trained
    with pytest.raises(PolicyError, match=r"seed 7 was not trained \(seeds \[0, 3\]\)"):
        result.policy(obs, seed=7)


def test_the_package_lists_its_public_names_without_importing_jax():
    public = {"train", "TrainResult", "make_config", "load_policy", "Callback", "LogPoint",
              "StopRequest", "Reference"}
    assert public <= set(dir(dreamerjax)) and public <= set(dreamerjax.__all__)
    assert dreamerjax.train is driver.train and dreamerjax.TrainResult is result.TrainResult
    assert dreamerjax.StopRequest is guard.StopRequest
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        dreamerjax.trian  # noqa: B018
    # `import dreamerjax` and dir() stay light: JAX comes with the first name that needs it.
    code = ("import sys, dreamerjax; names = dir(dreamerjax); "
            "assert 'train' in names and 'TrainResult' in names, names; "
            "assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_make_config_resolves_as_dreamerjax_info(capsys):
    """make_config's layers are the command line's (defaults < configs < sets < flags):
    the 12m model with opt.lr 1e-4 has the parameter count and learning rate `dreamerjax
    info` prints for the same arguments (counted by the function info uses)."""
    from dreamerjax.tools import cli

    config = dreamerjax.make_config("CartPole-v1", configs=["size12m"], sets=["opt.lr=1e-4"])
    argv = ["info", "--configs", "size12m", "--set", "opt.lr=1e-4", "--env", "CartPole-v1"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    total = re.search(r"^Optimised variables: ([\d,]+)$", printed, re.M).group(1)
    lr = re.search(r"^ +opt\.lr +(\S+) +\[--set opt\.lr=1e-4\]$", printed, re.M).group(1)
    assert rundir.describe(plan_lib.run_setup(config))["total"] == int(total.replace(",", ""))
    assert config.agent.opt.lr == float(lr) == 1e-4
    assert config == cli_args.config_from_args(cli.parse(argv).validate())


def test_make_config_layers_errors_and_versions():
    from dreamerjax.config.keys import ConfigError
    from dreamerjax.config.resolve import resolve

    make = dreamerjax.make_config
    # a --set after --configs, a flag after --set, --size after --configs
    assert make(configs=["size12m"], sets=["dyn.rssm.deter=1024"]).agent.rssm.deter == 1024
    assert make(sets=["run.steps=4000"], steps=8000).run.steps == 8000
    assert make(configs=["size12m"], size="1m").size == "1m"
    # run fields the command line has no flag for take the field's value
    assert make(tiny=True, batch_length=16, replay_capacity=64).run.batch_length == 16
    with pytest.raises(ConfigError, match="--configs size13m: unknown config name"):
        make(configs=["size13m"])
    with pytest.raises(ConfigError, match="opt.lr"):
        make(sets=["opt.lr=fast"])
    with pytest.raises(TypeError, match="unknown field 'learning_rate'"):
        make(learning_rate=1e-4)
    # The version: a Reference or its string, one place for agent and env defaults.
    head = make("CartPole-v1", reference=dreamerjax.Reference.E3F0224)
    assert head == make("CartPole-v1", reference="e3f0224") == resolve(reference="e3f0224")[0]
    assert head.agent.reference == "e3f0224" and type(head.agent.reference) is str
    assert head.env.dmc.repeat == 1 and make().env.dmc.repeat != 1  # HEAD's env defaults
    with pytest.raises(ConfigError, match="reference 'v3'; choose one of 29eb964, e3f0224"):
        make(reference="v3")


def test_make_config_takes_a_path_and_names_its_keyword():
    """replay_from takes a str or an os.PathLike and stores the text; a wrong type is
    named by make_config's keyword and its key, once (not by a command-line flag)."""
    import pathlib

    from dreamerjax.config.keys import ConfigError

    for given in (pathlib.Path("exported"), "exported"):
        config = dreamerjax.make_config("CartPole-v1", replay_from=given, offline=True)
        assert config.run.replay_from == "exported" and type(config.run.replay_from) is str
    with pytest.raises(ConfigError) as e:
        dreamerjax.make_config("CartPole-v1", replay_from=5, offline=True)
    assert str(e.value) == "replay_from: run.replay_from: expects str, got 5"
    with pytest.raises(ConfigError) as e:
        dreamerjax.make_config("CartPole-v1", steps="many")
    assert str(e.value) == "steps: run.steps: expects int, got 'many'"


def test_make_config_names_the_argument_that_fixes_it_and_a_wrong_env_first():
    from dreamerjax.config.keys import ConfigError
    from dreamerjax.run.setup import EnvError

    make = dreamerjax.make_config
    with pytest.raises(ConfigError) as e:
        make("CartPole-v1", steps=1200)
    assert str(e.value) == ("run.eval_every_rows: 2000 must divide run.steps (1200) so the "
                            "run ends on a log point; pass eval_every=1200 or steps=2000")
    assert make("CartPole-v1", steps=1200, eval_every=1200).run.steps == 1200  # the fix runs
    with pytest.raises(ConfigError, match=r"longer than the replay .*; pass steps=1200$"):
        make("CartPole-v1", steps=400, eval_every=400)
    assert make("CartPole-v1", steps=1200, eval_every=400).run.steps == 1200
    # A misspelt env is named before the replay that its short run would not fill.
    with pytest.raises(EnvError, match=r"^--env 'CartPol-v1': unknown gymnax env"):
        make("CartPol-v1", steps=400, eval_every=400)
    pytest.importorskip("gymnasium")
    with pytest.raises(EnvError, match=r"^--env gym_CartPol-v1: .*CartPol"):
        make("gym_CartPol-v1", steps=400, eval_every=400)

