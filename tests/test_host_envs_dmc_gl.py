"""dm_control's renderer for the DMC host envs (envs/host/dmc.py, import_suite): where egl
cannot load, an env without images goes on with no renderer when MUJOCO_GL was not set,
and refuses, naming MUJOCO_GL, with images or with MUJOCO_GL set. Each case in a fresh
process: dm_control reads MUJOCO_GL once, when it is imported.

egl is made to fail here as on a machine without an EGL library: PYOPENGL_PLATFORM=osmesa
makes dm_control's egl backend raise ImportError when it is imported."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("dm_control")

CODE = """
import os, sys
import numpy as np
from dreamerjax.envs.host.dmc import DMCEnv
try:
    env = DMCEnv('cartpole_balance', image=sys.argv[1] == 'image')
except ImportError as e:
    print('REFUSED', e)
    raise SystemExit(0)
env.reset(seed=0)
obs, reward, term, trunc, _ = env.step(np.zeros(1, np.float32))
assert sorted(obs) == ['position', 'velocity'] and reward > 0, (obs, reward)
print('STEPPED', os.environ['MUJOCO_GL'])
"""


def _run(image: bool, mujoco_gl: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    env["PYOPENGL_PLATFORM"] = "osmesa"
    if mujoco_gl is not None:
        env["MUJOCO_GL"] = mujoco_gl
    proc = subprocess.run([sys.executable, "-c", CODE, "image" if image else "state"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_a_state_env_goes_on_without_a_renderer_when_egl_fails():
    assert _run(image=False, mujoco_gl=None) == "STEPPED disable"


def test_an_image_env_refuses_naming_mujoco_gl():
    line = _run(image=True, mujoco_gl=None)
    assert line.startswith("REFUSED --env dmc_cartpole_balance: dm_control cannot load its "
                           "renderer with MUJOCO_GL=egl"), line
    assert "MUJOCO_GL=disable with env.dmc.image false" in line


def test_a_chosen_mujoco_gl_is_kept_and_its_failure_named():
    line = _run(image=False, mujoco_gl="egl")
    assert line.startswith("REFUSED --env dmc_cartpole_balance: dm_control cannot load its "
                           "renderer with MUJOCO_GL=egl"), line
