"""The tiers' XLA build (tests/conftest.py applies it): quick code generation, and the
environment of a child that compiles as `dreamerjax` users' programs compile."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

# LLVM optimises the machine code less: long-standing XLA options.
LLVM_QUICK = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# XLA:CPU's older elemental emitters for the fusions instead of its MLIR fusion emitters.
# Under LLVM_QUICK they compile in about 30 % less time (the quick tier: 232 -> 156 s on
# the 2-core AMD EPYC; docs/testing.md); under XLA's default build the reverse holds (the
# 1m update compiled in 109-123 s against 36-38 s), so users' programs keep the fusion
# emitters. XLA aborts on an option it does not know: only for the jaxlib versions checked.
FUSION_QUICK = "--xla_cpu_use_fusion_emitters=false"
FUSION_QUICK_JAXLIB = ("0.10.",)


def quick_codegen(jaxlib_version: str | None) -> str:
    """The XLA options of the tiers' quick build for this jaxlib version."""
    if jaxlib_version is not None and jaxlib_version.startswith(FUSION_QUICK_JAXLIB):
        return f"{LLVM_QUICK} {FUSION_QUICK}"
    return LLVM_QUICK


def _jaxlib_version() -> str | None:
    try:
        return importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        return None


QUICK_CODEGEN = quick_codegen(_jaxlib_version())


def users_build_env() -> dict:
    """This process's environment with XLA_FLAGS less QUICK_CODEGEN: a child started with
    it compiles as users' programs compile, whatever TEST_XLA says."""
    flags = os.environ.get("XLA_FLAGS", "")
    for option in QUICK_CODEGEN.split():
        flags = flags.replace(option, "")
    return dict(os.environ, XLA_FLAGS=" ".join(flags.split()))


def run_in_users_build(code: str, *args) -> None:
    """`python -c code TESTS_DIR *args` in a child with users_build_env(): the code finds the
    test modules through sys.argv[1] and passes its results back through files it writes."""
    subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), *map(str, args)],
                   env=users_build_env(), check=True, timeout=600)


def host_devices_env(count: int, env: dict | None = None) -> dict:
    """The environment of a child whose CPU is split into `count` XLA devices (real XLA
    devices sharing the cores: a mesh's layout and collectives, not its speed)."""
    env = dict(os.environ if env is None else env)
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}"
    return dict(env, XLA_FLAGS=flags.strip(), JAX_PLATFORMS="cpu")


def json_of_child(code: str, *args, devices: int, timeout: float = 1200) -> dict:
    """`python -c code *args` on `devices` host devices; the JSON object it prints last."""
    import json

    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)],
                          env=host_devices_env(devices), capture_output=True, text=True,
                          check=False, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_in_processes(argv: list[str], logs: list[Path], env: dict, timeout: float) -> None:
    """`dreamerjax train *argv --distributed` as len(logs) processes on localhost, joined
    by jax.distributed (a coordinator on a free port); each writes its output to its log.
    Output goes to files, not pipes: a process blocked on a full pipe (its progress bar)
    would stall the others in a collective."""
    base = [sys.executable, "-m", "dreamerjax.tools.cli", "train", *argv, "--distributed",
            "--coordinator", f"127.0.0.1:{free_port()}", "--num-processes", str(len(logs))]
    procs = []
    for i, log in enumerate(logs):
        with open(log, "w") as f:
            procs.append(subprocess.Popen([*base, "--process-id", str(i)], env=env,
                                          stdout=f, stderr=subprocess.STDOUT))
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            p.kill()
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log.read_text()[-4000:]
