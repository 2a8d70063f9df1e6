"""--configs / --set / --config / the reference's --KEY VALUE flags on `dreamerjax train` and
`dreamerjax info` (nothing is trained here)."""

import json

import pytest

from dreamerjax.config import resolve as R
from dreamerjax.config.defaults import Config
from dreamerjax.tools import args as cli_args
from dreamerjax.tools import cli


def _info(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["info", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _values(out: str) -> dict[str, tuple[str, str]]:
    """describe()'s key lines -> {key: (value, origin)}."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("  ") and "  [" in line.strip():  # "key  value  [origin]"
            key, rest = line.split(None, 1)
            value, origin = rest.rsplit("  [", 1)
            rows[key] = (value.strip(), origin.split("]")[0])
    return rows


def test_info_prints_precedence_values_origins_and_counts(capsys):
    code, out, _ = _info(capsys, "--configs", "size12m", "--env", "CartPole-v1")
    assert code == 0
    assert out.startswith("Precedence: defaults < --config FILE < --configs")
    assert "Layers applied: defaults < --configs size12m < --env" in out
    rows = _values(out)
    assert rows["dyn.rssm.deter"] == ("2048", "--configs size12m")
    assert rows["opt.lr"] == ("4e-05", "defaults")
    assert rows["task"] == ('"CartPole-v1"', "--env")
    assert "Optimised variables: 9,724,679" in out
    code, out, _ = _info(capsys, "--env", "Pendulum-v1", "--size", "1m")
    assert code == 0 and "Optimised variables: 637,318" in out
    assert "Layers applied: defaults < --size 1m < --env" in out


def test_info_shows_a_keys_word_as_given(tmp_path, capsys):
    """run.checkpoint_keep's `all` (the field holds 0) is shown as `all`, for a run's
    config.json too; a count is shown as the count."""
    for argv, shown in ((["--set", "run.checkpoint_keep=all"], "all"),
                        (["--set", "run.checkpoint_keep=0"], "all"),
                        (["--set", "run.checkpoint_keep=3"], "3"), ([], "2")):
        code, out, _ = _info(capsys, *argv)
        assert code == 0 and _values(out)["run.checkpoint_keep"][0] == shown
    path = tmp_path / "config.json"
    config = R.make_config(sets=["run.checkpoint_keep=all"])
    path.write_text(json.dumps(config.to_dict() | {"seeds": [0]}))
    code, out, _ = _info(capsys, "--config", str(path))
    assert code == 0 and _values(out)["run.checkpoint_keep"][0] == "all"


def test_reference_flag_form_and_set(capsys):
    code, out, _ = _info(capsys, "--configs", "dmc_proprio", "--run.train_ratio", "64",
                         "--set", r".*\.units=32", "--env", "Pendulum-v1")
    assert code == 0
    rows = _values(out)
    assert rows["run.train_ratio"] == ("64.0", "--set run.train_ratio=64")
    assert rows["actor.units"] == ("32", r"--set .*\.units=32")
    assert rows["dyn.rssm.deter"] == ("2048", "--configs dmc_proprio")
    assert rows["env.dmc.image"] == ("false", "--configs dmc_proprio")


def test_config_file_on_the_command_line(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("dyn:\n  rssm: {deter: 1024, hidden: 128}\nrun.steps: 4e4\n")
    code, out, _ = _info(capsys, "--config", str(path), "--set", "dyn.rssm.hidden=96")
    assert code == 0
    rows = _values(out)
    assert rows["dyn.rssm.deter"] == ("1024", f"--config {path}")
    assert rows["dyn.rssm.hidden"] == ("96", "--set dyn.rssm.hidden=96")
    assert rows["run.steps"] == ("40000", f"--config {path}")


@pytest.mark.parametrize("argv,message", [
    (["--configs", "size13m"], "--configs size13m: unknown config name"),
    (["--set", "batch_size=abc"], "batch_size: expects int, got 'abc'"),
    (["--batch_size", "abc"], "batch_size: expects int, got 'abc'"),
    (["--set", "dyn.rssm.deter=1020"], "dyn.rssm.deter: 1020 is not divisible"),
    (["--set", "batch_length=5000"], "batch_length: 5000 rows are longer than the replay"),
    (["--set", "logdir=/tmp"], "does not apply here: the run directory is --out"),
    (["--run.log_every", "30"], "does not apply here: seconds of wall clock"),
    (["--set", "dyn.rssm.detr=3"], "closest: dyn.rssm.deter"),
    (["--run.steps"], "--run.steps: needs a value"),
])
def test_bad_config_input_is_one_line_naming_the_key(capsys, argv, message):
    code, _, err = _info(capsys, *argv)
    assert code == 2
    assert message in err and err.count("\n") == 1


def test_train_validates_the_resolved_config_before_compiling(tmp_path, capsys):
    out = tmp_path / "run"
    # A preset's steps and the schedule: 3e5 rows, log points every 2000 rows: fine.
    args = cli.parse(["train", "--configs", "dmc_proprio", "--env", "CartPole-v1",
                      "--out", str(out)]).validate()
    config = cli_args.config_from_args(args)
    assert config.run.steps == 300_000 and config.size == "12m"
    assert config.run.env == "CartPole-v1"
    # A preset's task is not replaced by the default env.
    args = cli.parse(["train", "--configs", "crafter", "--out", str(out)]).validate()
    assert cli_args.config_from_args(args).run.env == "crafter_reward"
    # The schedule is checked on the resolved steps.
    assert cli.main(["train", "--set", "run.steps=3000", "--out", str(out)]) == 2
    assert "divide" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was written


def test_resume_refuses_config_changes(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(Config().to_dict() | {"seeds": [0]}))
    for flag, message in ((["--configs", "size12m"], "--configs cannot change a run"),
                          (["--set", "opt.lr=1e-3"],
                           "--set opt.lr=1e-3: opt.lr cannot change on --resume"),
                          (["--config", str(run / "config.json")],
                           "--config cannot change a run")):
        assert cli.main(["train", "--resume", str(run), *flag]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
        assert "--config" in err and "config.json" in err


def test_resume_applies_the_keys_that_may_change(tmp_path):
    """--resume takes --logger.outputs (as --set logger.outputs=...) and the resumable
    flags, a 0 included (--checkpoint-every 0: no further checkpoints)."""
    from dreamerjax.config.defaults import Config

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(Config(size="1m").to_dict() | {"seeds": [0]}))
    for argv in (["--logger.outputs", "jsonl", "mlflow"],
                 ["--set", "logger.outputs=jsonl,mlflow"]):
        argv = R.rewrite_key_flags(argv, ["set"])  # as cli.main reads the reference's form
        args = cli.parse(["train", "--resume", str(run), "--checkpoint-every", "0",
                          "--steps", "20000", *argv]).validate()
        config, seeds = cli.resume_config(args)
        assert config.logger.outputs == ("jsonl", "mlflow") and seeds == (0,)
        assert (config.run.checkpoint_every, config.run.steps) == (0, 20000)
        assert config.agent == Config().agent and config.size == "1m"


def test_cli_and_resolve_agree():
    args = cli.parse(["train", "--configs", "debug", "--set", "opt.lr=1e-3", "--steps",
                      "4000", "--eval-every", "400", "--out", "/nonexistent/x"])
    config = cli_args.config_from_args(args)
    want, _ = R.resolve(["debug"], ["opt.lr=1e-3"], steps=4000, eval_every=400)
    assert config == want


def _started(tmp_path, argv):
    """A run directory whose config.json is the one `dreamerjax train ARGV --out RUN` saves
    (run/driver.py writes the resolved config and the seeds with RunWriter)."""
    from dreamerjax.run.records import RunWriter

    run = tmp_path / "run"
    args = cli.parse(["train", *argv, "--out", str(run)]).validate()
    config = cli_args.config_from_args(args)
    with RunWriter(run, tensorboard=False) as writer:
        writer.write_config(config.to_dict() | {"seeds": list(args.seeds)})
    return run, config


@pytest.mark.parametrize("flags, seeds", [
    (["--data-devices", "2"], (0,)),
    (["--data-devices", "2", "--num-envs", "16", "--seeds", "0", "1"], (0, 1)),
    (["--cnn-mults", "1", "2", "--cnn-minres", "5", "--twohot-mean", "pairsum"], (0,)),
    (["--reference", "e3f0224", "--data-devices", "2"], (0,)),
    (["--replay-from", "exported/", "--offline"], (0,)),  # a path, stored as text
])
def test_resume_accepts_the_flags_the_run_started_with(flags, seeds, tmp_path):
    """Every run-defining flag repeated on --resume with the value the run started with
    is accepted, compared by what it sets (--data-devices 2 is jax.train_devices (0, 1)),
    and the resumed config is the run's own."""
    from _runs import small_argv

    run, config = _started(tmp_path, [*small_argv(), *flags])
    args = cli.parse(["train", "--resume", str(run), *small_argv(), *flags]).validate()
    assert cli.resume_config(args) == (config, seeds)


def test_resume_accepts_the_runs_train_mesh_spelled_otherwise(tmp_path):
    """jax.train_mesh '2,1,1' over 2 train devices is the run's '-1,1,1': accepted, and
    the run keeps its own spelling."""
    from _runs import small_argv

    run, config = _started(tmp_path, [*small_argv(), "--data-devices", "2"])
    argv = R.rewrite_key_flags(["--data-devices", "2", "--jax.train_mesh", "2,1,1"], ["set"])
    args = cli.parse(["train", "--resume", str(run), *argv]).validate()
    assert cli.resume_config(args) == (config, (0,))
    assert config.run.train_mesh == "-1,1,1"


@pytest.mark.parametrize("flags, message", [
    (["--data-devices", "4"], "--data-devices 4 conflicts with the run's jax.train_devices "
                              "(0, 1); it cannot change on --resume"),
    (["--data-devices", "1"], "--data-devices 1 conflicts with the run's jax.train_devices"),
    (["--num-envs", "16"], "--num-envs 16 conflicts with the run's run.num_envs 8"),
    (["--set", "jax.train_mesh=1,2,1"], "--set jax.train_mesh=1,2,1: jax.train_mesh cannot "
                                        "change on --resume"),
    (["--replay-from", "exported"], "--replay-from 'exported' conflicts with the run's "
                                    "run.replay_from ''; it cannot change on --resume"),
])
def test_resume_refuses_a_flag_that_changes_the_run(flags, message, tmp_path, capsys,
                                                    monkeypatch):
    """A flag whose meaning differs from the run's: one line naming it, before JAX."""
    import sys

    from _runs import small_argv

    run, _ = _started(tmp_path, [*small_argv(), "--data-devices", "2"])
    monkeypatch.setitem(sys.modules, "dreamerjax.run.driver", None)
    assert cli.main(["train", "--resume", str(run), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
