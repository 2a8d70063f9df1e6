"""numpy float32 ports of gymnax tasks for the reference harness (run_reference.py).

Physics only: no embodied import, so tests/test_reference_pendulum_port.py can check a port
against gymnax in our own venv; port_env.py wraps a port as an `embodied.Env`.

A port holds one env's state and mirrors gymnax's `reset_env` / `step_env` (no auto-reset)
plus `is_truncated`, in gymnax's order of operations, with every constant a float32 so the
arithmetic is float32 under numpy 1.x and 2.x alike.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
PI = F32(np.pi)  # gymnax's jnp.pi, a weakly typed float32 in its float32 arithmetic
TWO_PI = F32(2 * np.pi)


def angle_normalize(x):
    """gymnax pendulum.py angle_normalize: ((x + pi) % (2 pi)) - pi, floored modulo."""
    return (x + PI) % TWO_PI - PI


class Pendulum:
    """gymnax Pendulum-v1 (environments/classic_control/pendulum.py, default EnvParams).

    reset: theta ~ U[-pi, pi], theta_dot ~ U[-1, 1] (reset_env's `high = [pi, 1]`), time 0.
    step: reward from the pre-step state and clipped torque, then semi-implicit Euler with
    the new velocity clipped before the angle update. Never terminates; truncated once
    time >= 200 (environment.py is_truncated).
    """

    name = "Pendulum-v1"
    obs_size = 3
    discrete = False
    action_shape = (1,)
    action_low = F32(-2.0)  # -max_torque
    action_high = F32(2.0)
    obs_high = np.array([1.0, 1.0, 8.0], np.float32)  # observation_space: [1, 1, max_speed]
    limit = 200  # max_steps_in_episode

    max_speed = F32(8.0)
    max_torque = F32(2.0)
    dt = F32(0.05)
    g = F32(10.0)
    m = F32(1.0)
    length = F32(1.0)  # gymnax's params.l

    def __init__(self) -> None:
        self.theta = F32(0.0)
        self.theta_dot = F32(0.0)
        self.time = 0

    def obs(self) -> np.ndarray:
        """get_obs: [cos theta, sin theta, theta_dot]."""
        return np.array([np.cos(self.theta), np.sin(self.theta), self.theta_dot], np.float32)

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        high = np.array([np.pi, 1.0], np.float32)
        theta, theta_dot = rng.uniform(-high, high).astype(np.float32)
        self.set_state(theta, theta_dot, 0)
        return self.obs()

    def step(self, action) -> tuple[np.ndarray, np.float32, bool, bool]:
        """(obs, reward, terminated, truncated) of one step with torque `action` [1]."""
        u = np.clip(np.asarray(action, np.float32), -self.max_torque, self.max_torque)
        u = u.reshape(())
        th, thdot = self.theta, self.theta_dot
        reward = -(angle_normalize(th) ** 2 + F32(0.1) * thdot ** 2 + F32(0.001) * u ** 2)
        # 3 g / (2 l) and 3 / (m l^2) fold to 15 and 3 exactly, in either precision.
        accel = (F32(3.0) * self.g / (F32(2.0) * self.length) * np.sin(th)
                 + F32(3.0) / (self.m * self.length ** 2) * u)
        newthdot = np.clip(thdot + accel * self.dt, -self.max_speed, self.max_speed)
        newth = th + newthdot * self.dt
        self.set_state(newth, newthdot, self.time + 1)
        return self.obs(), F32(reward), False, self.time >= self.limit

    def get_state(self) -> dict:
        return {"theta": F32(self.theta), "theta_dot": F32(self.theta_dot), "time": self.time}

    def set_state(self, theta, theta_dot, time: int) -> None:
        self.theta = F32(theta)
        self.theta_dot = F32(theta_dot)
        self.time = int(time)


# Ports by harness task name; the reference config's `task` label is gymnax_<name>.
PORTS = {"pendulum": Pendulum}
