"""cli.py: --help of every subcommand, early validation, lazy dispatch."""

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from dreamerjax.run.records import read_records
from dreamerjax.tools import args as cli_args
from dreamerjax.tools import cli

SUBCOMMANDS = ("train", "eval", "info", "parity", "compare", "bench", "demo", "merge",
               "replay")


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main([command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert f"dreamerjax {command}" in out


def test_top_level_help_lists_subcommands(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for command in SUBCOMMANDS:
        assert command in out


def test_train_help_shows_field_docs(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    out = capsys.readouterr().out
    for flag in ("--env", "--size", "--seeds", "--steps", "--eval-every", "--eval-episodes",
                 "--num-envs", "--train-ratio", "--out", "--resume", "--devices",
                 "--no-compile-cache", "--checkpoint-every", "--tiny"):
        assert flag in out
    assert "default: 20000" in out  # the config default, not None


def test_parse_train(tmp_path):
    args = cli.parse(["train", "--seeds", "0", "1", "2", "--steps", "4000", "--eval-every",
                      "800", "--out", str(tmp_path / "run"), "--no-compile-cache", "--tiny"])
    assert isinstance(args, cli.TrainArgs)
    assert args.seeds == (0, 1, 2) and args.steps == 4000 and args.eval_every == 800
    assert args.no_compile_cache and args.tiny and args.env is None
    resolved = args.validate()
    assert (resolved.env, resolved.size) == ("CartPole-v1", "1m")  # defaults of a new run
    assert resolved.run_overrides() == {"env": "CartPole-v1", "steps": 4000, "eval_every": 800}
    assert resolved.run_dir == tmp_path / "run"
    # with --resume env and size stay unset: the checkpoint's config applies
    (tmp_path / "old").mkdir()
    resumed = cli.parse(["train", "--resume", str(tmp_path / "old")]).validate()
    assert resumed.env is None and resumed.size is None


def test_small_argv_is_small_config(tmp_path):
    """The tests' small run on the command line (tests/_runs.py) resolves to the Config its
    library tests train, so CLI and library tests share one compiled program."""
    from _runs import small_argv, small_config

    for steps in (240, 160):
        args = cli.parse(["train", *small_argv(steps), "--out", str(tmp_path / "r")])
        assert cli_args.config_from_args(args.validate()) == small_config(steps=steps)


def _train_error(argv, capsys):
    code = cli.main(["train", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    return err


@pytest.mark.parametrize("argv, message", [
    ([], "--out RUN_DIR is required"),
    (["--out", "{tmp}/r", "--steps", "0"], "--steps: run.steps: must be positive"),
    (["--out", "{tmp}/r", "--eval-every", "1000"],
     "--eval-every: run.eval_every_rows: 1000 must be a multiple of run.num_envs"),
    (["--out", "{tmp}/r", "--steps", "3000", "--eval-every", "800"],
     "run.eval_every_rows: 800 must divide run.steps (3000)"),
    (["--out", "{tmp}/r", "--seeds", "0", "1", "0"], "unique"),
    (["--out", "{tmp}/r", "--size", "3m"], "known sizes"),
    (["--out", "{tmp}/r", "--train-ratio", "-1"],
     "--train-ratio: run.train_ratio: must be positive"),
    (["--out", "{tmp}/r", "--seeds", "0", "1", "2", "--devices", "2"], "split evenly"),
    (["--out", "{tmp}/r", "--target-return", "nan"], "--target-return must be a finite"),
    (["--out", "{tmp}/full"], "not empty"),
    (["--resume", "{tmp}/nowhere"], "no such run directory"),
    (["--resume", "{tmp}/full", "--out", "{tmp}/r"], "not both"),
    (["--out", "{tmp}/r", "--cnn-mults", "1", "0"],
     "--cnn-mults: enc.simple.mults: needs one or more positive"),
    (["--out", "{tmp}/r", "--cnn-minres", "0"],
     "--cnn-minres: enc.simple.minres: must be positive"),
    (["--resume", "{tmp}/full", "--cnn-minres", "5"], "cannot change on --resume"),
    (["--resume", "{tmp}/full", "--twohot-mean", "pairsum"], "--twohot-mean 'pairsum' "
                                                              "conflicts with the run's"),
    (["--resume", "{tmp}/full", "--eval-every", "800"], "--eval-every 800 conflicts"),
    (["--resume", "{tmp}/full", "--num-envs", "4"], "--num-envs 4 conflicts"),
    (["--resume", "{tmp}/full", "--env", "Acrobot-v1"], "--env 'Acrobot-v1' conflicts"),
    (["--resume", "{tmp}/full", "--seeds", "0"], "--seeds (0,) conflicts"),
    (["--resume", "{tmp}/full", "--size", "12m"], "--size '12m' conflicts"),
    (["--resume", "{tmp}/full", "--tiny"], "--tiny True conflicts"),
    (["--resume", "{tmp}/full", "--steps", "800"], "steps may only grow"),
    (["--resume", "{tmp}/full", "--steps", "20016"], "must divide run.steps (20016)"),
    (["--resume", "{tmp}/full", "--set", "batch_size=8"],
     "--set batch_size=8: batch_size cannot change on --resume"),
    (["--resume", "{tmp}/full", "--batch_size", "8"],
     "--set batch_size=8: batch_size cannot change on --resume"),
    (["--resume", "{tmp}/full", "--configs", "debug"], "--configs cannot change a run"),
    (["--resume", "{tmp}/full", "--logger.outputs", "jsonl", "scope"],
     "logger.outputs: 'scope' is not an output here"),
    (["--resume", "{tmp}/noconfig"], "cannot read the run's config"),
    # The fix named as the flag to pass, and a wrong env before the replay's sizes.
    (["--out", "{tmp}/r", "--env", "CartPole-v1", "--steps", "1200"],
     "run.eval_every_rows: 2000 must divide run.steps (1200) so the run ends on a log point;"
     " pass --eval-every 1200 or --steps 2000"),
    (["--out", "{tmp}/r", "--steps", "400", "--eval-every", "400"],
     "min(replay.size, run.steps) / run.num_envs); pass --steps 1200"),
    (["--out", "{tmp}/r", "--env", "CartPol-v1", "--steps", "400", "--eval-every", "400"],
     "--env 'CartPol-v1': unknown gymnax env 'CartPol-v1'"),
    (["--out", "{tmp}/r", "--env", "gym_CartPol-v1", "--steps", "400", "--eval-every",
      "400"], "--env gym_CartPol-v1: Environment `CartPol` doesn't exist"),
    # A damaged config.json is named so, with its first bad key.
    (["--resume", "{tmp}/empty"], "empty/config.json is damaged: no 'seeds'"),
    (["--resume", "{tmp}/nosteps"], "nosteps/config.json is damaged: no 'run.steps'"),
    (["--resume", "{tmp}/noseeds"], "noseeds/config.json is damaged: 'seeds' is []"),
])
def test_train_bad_arguments(argv, message, tmp_path, capsys, monkeypatch):
    from dreamerjax.config.defaults import Config

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "records.jsonl").write_text("")
    (tmp_path / "full" / "config.json").write_text(json.dumps(
        Config(size="1m").to_dict() | {"seeds": [0, 1]}))
    (tmp_path / "noconfig").mkdir()
    saved = Config(size="1m").to_dict() | {"seeds": [0, 1]}
    for name, text in (("empty", "{}"),
                       ("nosteps", json.dumps(saved | {"run": {
                           k: v for k, v in saved["run"].items() if k != "steps"}})),
                       ("noseeds", json.dumps(saved | {"seeds": []}))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(text)
    if "gym_" in " ".join(argv):
        pytest.importorskip("gymnasium")
    # Validation must fail before the driver (and with it JAX) is imported.
    monkeypatch.setitem(sys.modules, "dreamerjax.run.driver", None)
    err = _train_error([a.format(tmp=tmp_path) for a in argv], capsys)
    assert message in err
    assert "dreamerjax train: error:" in err


@pytest.mark.parametrize("argv, message", [
    # The reference's presets of one env (docs/scaling.md lists them).
    (["--configs", "atari100k", "--data-devices", "2"], "run.num_envs: 1 cannot be split "
     "over the 2 data devices (jax.train_devices, --data-devices 2): each data device steps "
     "its own envs and keeps their replay rows; pass --num-envs 2"),
    (["--configs", "crafter", "--reference", "e3f0224", "--data-devices", "4"],
     "run.num_envs: 1 cannot be split over the 4 data devices"),
    (["--configs", "bsuite", "--data-devices", "8"], "; pass --num-envs 8"),
    (["--num-envs", "10", "--data-devices", "4"], "--num-envs: run.num_envs: 10 cannot be "
     "split over the 4 data devices (jax.train_devices, --data-devices 4): each data device "
     "steps its own envs and keeps their replay rows; pass --num-envs 8"),
    (["--data-devices", "4", "--set", "batch_size=6"], "batch_size: 6 cannot be split over "
     "the 4 data devices (jax.train_devices, --data-devices 4): each data device samples "
     "batch_size / 4 sequences from its own envs' replay rows; pass --set batch_size=8"),
])
def test_envs_and_batch_that_do_not_split_over_the_data_devices(argv, message, tmp_path,
                                                                capsys, monkeypatch):
    """num_envs and batch_size split over the data devices (each steps its own envs and
    keeps their replay): one line that says why and what to give, before anything is
    compiled or the run directory is made. (The env is checked first: a preset's suite
    must be installed for its config's message.)"""
    suite = {"atari100k": "ale_py", "crafter": "crafter", "bsuite": "bsuite"}
    if "--configs" in argv:  # found, not imported: crafter's import of gym warns on stderr
        package = suite[argv[argv.index("--configs") + 1]]
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"needs {package}")
    monkeypatch.setitem(sys.modules, "dreamerjax.run.driver", None)
    err = _train_error([*argv, "--out", str(tmp_path / "r")], capsys)
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_too_few_devices_is_one_line_before_anything_starts(tmp_path, capsys, monkeypatch):
    """More data devices than JAX sees: one line naming the flags, before a precompile
    child, a logger or the run directory starts (the check needs JAX, so it is the
    driver's first step rather than the command line's)."""
    import jax
    from _runs import small_argv

    from dreamerjax.run import driver

    def no_child(*args, **kwargs):
        raise AssertionError("a precompile child was started")

    monkeypatch.setenv("DREAMERJAX_PRECOMPILE", "1")  # the command line's default
    monkeypatch.setattr(driver.precompile_lib, "precompile", no_child)
    monkeypatch.setattr(driver.precompile_lib, "enable_compile_cache", lambda enabled: None)
    want = jax.device_count() + 1
    out = tmp_path / "r"
    err = _train_error([*small_argv(160), "--data-devices", str(want), "--out", str(out)],
                       capsys)
    seen = (f"{want - 1} JAX devices are" if want > 2 else "1 JAX device is")
    assert [line for line in err.splitlines() if line.strip()] == [
        f"dreamerjax train: error: --devices 1 x --data-devices {want} needs {want} devices "
        f"but only {seen} visible"]
    assert not out.exists()


def test_parse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["train", "--seeds", "a"])
    assert exit_.value.code == 2
    with pytest.raises(SystemExit) as exit_:
        cli.main(["nonsense"])
    assert exit_.value.code == 2


@pytest.mark.parametrize("argv, line", [
    (["train", "--video-evry", "2"], "dreamerjax train: error: unknown flag --video-evry "
                                     "(see --help); closest: --video-every, --report-every, "
                                     "--checkpoint-every"),
    (["train", "--num_env", "2"], "dreamerjax train: error: unknown flag --num_env (see "
                                  "--help); closest: --num-envs, --env"),
    (["train", "--qqq"], "dreamerjax train: error: unknown flag --qqq (see --help)"),
])
def test_a_mistyped_flag_gets_the_closest_names(argv, line, capsys):
    """An unknown flag is one line with the closest flags of its command, as a
    mistyped config key gets the closest keys."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err == line + "\n"


def _fake_module(monkeypatch, name, **attrs):
    """`name` replaced by a module holding attrs, in sys.modules and on its package (where
    `from dreamerjax.tools import bench` finds a module imported by an earlier test)."""
    import importlib

    parent, _, child = name.rpartition(".")
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(importlib.import_module(parent), child, mod, raising=False)
    return mod


def test_dispatch_calls_implementations(tmp_path, monkeypatch):
    calls = []
    # main runs a subcommand's function from the table cli.COMMANDS
    monkeypatch.setitem(cli.COMMANDS, cli.TrainArgs, lambda a: calls.append(("train", a)) or 0)
    monkeypatch.setitem(cli.COMMANDS, cli.EvalArgs, lambda a: calls.append(("eval", a)) or 0)
    monkeypatch.setitem(cli.COMMANDS, cli.InfoArgs, lambda a: calls.append(("info", a)) or 3)
    _fake_module(monkeypatch, "dreamerjax.tools.parity",
                 main_parity=lambda d, strict: calls.append(("parity", d, strict)) or 1,
                 host_devices_flags=lambda d, env: None)
    _fake_module(monkeypatch, "dreamerjax.tools.protocol",
                 compare_main=lambda run, ref, out, seeds=None, smoke=False:
                 calls.append(("compare", run, ref, out, seeds, smoke)) or 0)
    _fake_module(monkeypatch, "dreamerjax.tools.bench", main=lambda a: calls.append(("bench", a)))
    run = tmp_path / "run"
    run.mkdir()
    assert cli.main(["train", "--out", str(tmp_path / "new")]) == 0
    assert cli.main(["train", "--resume", str(run), "--steps", "40000"]) == 0
    assert cli.main(["eval", str(run), "--episodes", "3"]) == 0
    assert cli.main(["info", "--size", "12m"]) == 3
    assert cli.main(["parity", str(tmp_path), "--strict"]) == 1
    assert cli.main(["compare", str(run), "--reference", str(tmp_path), "--smoke"]) == 0
    assert cli.main(["bench", "--json", "--seeds", "1", "3", "--updates", "5"]) == 0
    kinds = [c[0] for c in calls]
    assert kinds == ["train", "train", "eval", "info", "parity", "compare", "bench"]
    assert calls[0][1].env == "CartPole-v1" and calls[0][1].size == "1m"
    assert calls[1][1].resume == run and calls[1][1].steps == 40000
    assert calls[2][1] == cli.EvalArgs(run_dir=run, episodes=3)
    assert calls[3][1].size == "12m"
    assert calls[4][1:] == (str(tmp_path), True)
    assert calls[5][1:] == (str(run), str(tmp_path), None, None, True)
    assert calls[6][1] == cli.BenchArgs(json=True, seeds=(1, 3), updates=5)


def test_demo_runs(tmp_path, capsys):
    # The demo command whole, shortened (--tiny, 640 rows; its learning is the slow tier's
    # tests/test_demo_learns.py): the demo's settings reach the run, the artifacts are
    # made, the last line says what was learned and where the pictures are.
    out = tmp_path / "demo"
    assert cli.main(["demo", "--out", str(out), "--seed", "3", "--tiny", "--steps", "640"]) == 0
    recs = read_records(out)
    assert [(r["seed"], r["rows"]) for r in recs] == [(3, 320), (3, 640)] or \
        recs[-1]["eval_mean"] >= cli.DEMO_LEARNED  # a lucky draw ends at its target
    config = json.loads((out / "config.json").read_text())
    assert (config["run"]["train_ratio"], config["run"]["batch_size"]) == (
        cli_args.DEMO_RUN["train_ratio"], 8)
    for name in ("curves.png", "episode.mp4"):
        assert (out / name).stat().st_size > 0
    assert any((out / "report").iterdir())  # written at the run's last log point
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("CartPole ") and f"pictures in {out}/" in last
    assert f"evaluation return {recs[-1]['eval_mean']:.0f} (max 500" in last
    # a second demo into the same directory is refused before training, as train's --out
    assert cli.main(["demo", "--out", str(out)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert len(read_records(out)) == len(recs)


def test_demo_summary_line():
    line = cli.demo_summary(97.6, 251.4, Path("runs/demo"))
    assert line.startswith("CartPole not learned yet") and "return 98 (max 500" in line
    assert "after 4 min 11 s; pictures in runs/demo/" in line
    assert "after 59 s;" in cli.demo_summary(150.0, 59.0, Path("d"))


def test_console_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "info", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--size" in proc.stdout


def test_image_geometry_flags_reach_the_config(capsys):
    """MinAtar's 10 x 10 images: refused with a suggestion by default, built with it."""
    assert cli.main(["info", "--env", "Breakout-MinAtar"]) == 2
    err = capsys.readouterr().err
    assert "--cnn-mults 1 2 --cnn-minres 5" in err
    assert cli.main(["info", "--env", "Breakout-MinAtar", "--cnn-mults", "1", "2",
                     "--cnn-minres", "5"]) == 0
    out = capsys.readouterr().out  # info prints every dotted key: value  [origin]
    lines = {x.split()[0]: x.split()[1:] for x in out.splitlines() if x.startswith("  ")}
    for net in ("enc", "dec"):
        assert lines[f"{net}.simple.mults"][:2] == ["[1,", "2]"]
        assert lines[f"{net}.simple.minres"][:2] == ["5", "[--cnn-minres]"]


# A process ended by cli.exit_now: what its threads, atexit handlers and buffered output
# would have done at an interpreter's exit happens, then it exits with the code given.
EXIT_NOW = """
import atexit, threading, time
from dreamerjax.tools import cli
atexit.register(lambda: print("atexit handler ran"))
thread = threading.Thread(target=lambda: (time.sleep(0.3), print("thread finished")))
thread.start()
print("buffered", end="")
cli.exit_now(3)
print("never")
"""


def test_exit_now_joins_threads_runs_atexit_and_flushes():
    proc = subprocess.run([sys.executable, "-c", EXIT_NOW], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.startswith("buffered")
    assert "thread finished" in proc.stdout and "atexit handler ran" in proc.stdout
    assert proc.stdout.index("thread finished") < proc.stdout.index("atexit handler ran")
    assert "never" not in proc.stdout


def test_the_executable_ends_with_exit_now():
    """pyproject's `dreamerjax` script and `python -m dreamerjax.tools.cli` run console()
    (main, then exit_now), with main's exit status."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dreamerjax"] == "dreamerjax.tools.cli:console"
    proc = subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "envs"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "gymnax" in proc.stdout  # printed, and flushed before the exit
    proc = subprocess.run([sys.executable, "-m", "dreamerjax.tools.cli", "info", "--env",
                           "CartPole-v1", "--set", "run.no_such_key=1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no_such_key" in proc.stderr, proc.stderr
