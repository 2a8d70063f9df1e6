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


def wrap(x, low, high):
    """gymnax acrobot.py wrap: x shifted by whole periods into [low, high)."""
    diff = high - low
    go_up = F32(x < low)
    go_down = F32(x >= high)
    how_often = go_up * np.ceil((low - x) / diff) + go_down * np.floor((x - high) / diff
                                                                      + F32(1.0))
    return F32(x - how_often * diff * go_down + how_often * diff * go_up)


class Acrobot:
    """gymnax Acrobot-v1 (environments/classic_control/acrobot.py, default EnvParams: the
    'book' dynamics, no torque noise).

    reset: both angles and both velocities ~ U[-0.1, 0.1], time 0.
    step: torque -1 / 0 / +1 by the action index, one Runge-Kutta-4 step of dt 0.2 (gymnax
    integrates once where gym subdivides), angles wrapped into [-pi, pi), velocities
    clipped to 4 pi and 9 pi; reward -1 unless the tip is above the bar (then 0 and
    terminated); truncated once time >= 500.
    """

    name = "Acrobot-v1"
    obs_size = 6
    discrete = True
    num_actions = 3
    limit = 500  # max_steps_in_episode

    dt = F32(0.2)
    m1 = m2 = F32(1.0)  # link masses
    l1 = F32(1.0)  # link_length_1
    lc1 = lc2 = F32(0.5)  # link_com_pos
    i1 = i2 = F32(1.0)  # link_moi
    g = F32(9.8)
    max_vel_1 = F32(4 * np.pi)
    max_vel_2 = F32(9 * np.pi)
    obs_high = np.array([1.0, 1.0, 1.0, 1.0, 4 * np.pi, 9 * np.pi], np.float32)
    torques = np.array([-1.0, 0.0, 1.0], np.float32)  # available_torque

    def __init__(self) -> None:
        self.s = np.zeros(4, np.float32)  # theta1, theta2, dtheta1, dtheta2
        self.time = 0

    def obs(self) -> np.ndarray:
        t1, t2, v1, v2 = self.s
        return np.array([np.cos(t1), np.sin(t1), np.cos(t2), np.sin(t2), v1, v2], np.float32)

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        self.set_state(rng.uniform(-0.1, 0.1, 4).astype(np.float32), 0)
        return self.obs()

    def dsdt(self, y: np.ndarray) -> np.ndarray:
        """gymnax dsdt of the state augmented with the torque [5] -> its derivative [5]."""
        m1, m2, l1, lc1, lc2, i1, i2, g = (self.m1, self.m2, self.l1, self.lc1, self.lc2,
                                           self.i1, self.i2, self.g)
        th1, th2, dth1, dth2, a = y
        d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + F32(2) * l1 * lc2 * np.cos(th2)) + i1 + i2
        d2 = m2 * (lc2**2 + l1 * lc2 * np.cos(th2)) + i2
        phi2 = m2 * lc2 * g * np.cos(th1 + th2 - PI / F32(2.0))
        phi1 = (-m2 * l1 * lc2 * dth2**2 * np.sin(th2)
                - F32(2) * m2 * l1 * lc2 * dth2 * dth1 * np.sin(th2)
                + (m1 * lc1 + m2 * l1) * g * np.cos(th1 - PI / F32(2))
                + phi2)
        ddth2 = ((a + d2 / d1 * phi1 - m2 * l1 * lc2 * dth1**2 * np.sin(th2) - phi2)
                 / (m2 * lc2**2 + i2 - d2**2 / d1))
        ddth1 = -(d2 * ddth2 + phi1) / d1
        return np.array([dth1, dth2, ddth1, ddth2, 0.0], np.float32)

    def step(self, action) -> tuple[np.ndarray, np.float32, bool, bool]:
        """(obs, reward, terminated, truncated) of one step with action index `action`."""
        index = int(np.asarray(action).reshape(()))  # the harness may pass it as [1]
        y0 = np.append(self.s, self.torques[index]).astype(np.float32)
        half = self.dt / F32(2.0)
        k1 = self.dsdt(y0)
        k2 = self.dsdt(y0 + half * k1)
        k3 = self.dsdt(y0 + half * k2)
        k4 = self.dsdt(y0 + self.dt * k3)
        ns = y0 + self.dt / F32(6.0) * (k1 + F32(2) * k2 + F32(2) * k3 + k4)
        th1, th2 = wrap(ns[0], -PI, PI), wrap(ns[1], -PI, PI)
        v1 = np.clip(ns[2], -self.max_vel_1, self.max_vel_1)
        v2 = np.clip(ns[3], -self.max_vel_2, self.max_vel_2)
        self.set_state(np.array([th1, th2, v1, v2], np.float32), self.time + 1)
        above = bool(-np.cos(th1) - np.cos(th2 + th1) > F32(1.0))
        reward = F32(-1.0) * (F32(1) - F32(above))
        return self.obs(), F32(reward), above, self.time >= self.limit

    def get_state(self) -> dict:
        return {"s": self.s.copy(), "time": self.time}

    def set_state(self, s, time: int) -> None:
        self.s = np.asarray(s, np.float32).copy()
        self.time = int(time)


class CartPole:
    """gymnax CartPole-v1 (environments/classic_control/cartpole.py, default EnvParams).

    reset: x, x_dot, theta, theta_dot ~ U[-0.05, 0.05], time 0.
    step: force -10 / +10 by the action index (0 / 1), one explicit Euler step of tau 0.02
    with the pre-step velocities; reward 1 - (the pre-step state was terminal), i.e. 1 on
    every step the harness takes (it resets after an episode's last step); terminated once
    |x| > 2.4 or |theta| > 12 degrees; truncated once time >= 500.
    """

    name = "CartPole-v1"
    obs_size = 4
    discrete = True
    num_actions = 2
    limit = 500  # max_steps_in_episode

    gravity = F32(9.8)
    masspole = F32(0.1)
    total_mass = F32(1.0 + 0.1)  # gymnax's default, masscart + masspole
    length = F32(0.5)
    polemass_length = F32(0.05)  # masspole * length
    force_mag = F32(10.0)
    tau = F32(0.02)
    theta_threshold = F32(12 * 2 * np.pi / 360)
    x_threshold = F32(2.4)
    # observation_space: [2 x_threshold, float32 max, 2 theta_threshold, float32 max]
    obs_high = np.array([2 * 2.4, np.finfo(np.float32).max, 2 * (12 * 2 * np.pi / 360),
                         np.finfo(np.float32).max], np.float32)

    def __init__(self) -> None:
        self.s = np.zeros(4, np.float32)  # x, x_dot, theta, theta_dot
        self.time = 0

    def obs(self) -> np.ndarray:
        return self.s.copy()

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        self.set_state(rng.uniform(-0.05, 0.05, 4).astype(np.float32), 0)
        return self.obs()

    def terminated(self, s: np.ndarray) -> bool:
        """is_terminated: the cart off the track or the pole past the angle limit."""
        x, theta = s[0], s[2]
        return bool(x < -self.x_threshold or x > self.x_threshold
                    or theta < -self.theta_threshold or theta > self.theta_threshold)

    def step(self, action) -> tuple[np.ndarray, np.float32, bool, bool]:
        """(obs, reward, terminated, truncated) of one step with action index `action`."""
        a = F32(int(np.asarray(action).reshape(())))  # the harness may pass it as [1]
        prev_terminal = self.terminated(self.s)
        x, x_dot, theta, theta_dot = self.s
        force = self.force_mag * a - self.force_mag * (F32(1) - a)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (F32(4.0 / 3.0) - self.masspole * costheta**2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        new = np.array([x + self.tau * x_dot, x_dot + self.tau * xacc,
                        theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc],
                       np.float32)
        self.set_state(new, self.time + 1)
        reward = F32(1.0) - F32(prev_terminal)
        return self.obs(), reward, self.terminated(new), self.time >= self.limit

    def get_state(self) -> dict:
        return {"s": self.s.copy(), "time": self.time}

    def set_state(self, s, time: int) -> None:
        self.s = np.asarray(s, np.float32).copy()
        self.time = int(time)


# Ports by harness task name; the reference config's `task` label is gymnax_<name>.
PORTS = {"pendulum": Pendulum, "acrobot": Acrobot, "cartpole": CartPole}
