"""PinPad as host envs (`--env pinpad_three` ... `pinpad_eight`).

The semantics of the reference's PinPad (embodied/envs/pinpad.py at 29eb964, the same at
e3f0224), a grid world in numpy that needs no package:

- a 16 x 14 room (walls on its border) with 3 to 8 coloured pads, numbered 1 ... N; the
  task (`three` ... `eight`) names how many (pinpad.py:22-29);
- 5 discrete actions: stay, down, up, right, left (one cell; into a wall: stay);
- stepping onto a pad appends it to the visited sequence unless it is the last one there,
  the sequence keeping the latest N pads; when it reads 1, 2, ..., N the step's reward is
  10 and a 10-step countdown starts (no further reward during it), at whose end the player
  is put on a random free cell and the sequence is emptied (pinpad.py:64-92);
- the player starts on a uniformly drawn free cell (in the order the reference lists
  them, column by column); the draws come from one numpy RandomState per env, seeded by
  `reset(seed)` (the reference's is unseeded, pinpad.py:33);
- `image`: [64, 64, 3] uint8, each cell 4 x 4 pixels: walls grey, the pad under the
  player in its colour and the others faded to 10 %, the player black, the background
  light green during the countdown, and two grey rows below the room showing the
  sequence's colours (pinpad.py:94-112);
- no termination; `length` (10,000) steps end an episode as a time limit.

PinPad has no `env.pinpad` settings in the reference's configs.yaml, so none here.
"""

from __future__ import annotations

import numpy as np

from dreamerjax.envs.host.base import HostEnv, HostSpec, check_obs_space

WIDTH, HEIGHT = 16, 14  # the room in cells, walls included
CELL = 4  # pixels per cell side: (16 x 16 cells) x 4 = 64 x 64
WALL = (192, 192, 192)
COUNTDOWN_BACKGROUND = (223, 255, 223)
COUNTDOWN = 10  # steps between a completed sequence and the respawn
REWARD = 10.0
PAD_COLORS = {1: (255, 0, 0), 2: (0, 255, 0), 3: (0, 0, 255), 4: (255, 255, 0),
              5: (255, 0, 255), 6: (0, 255, 255), 7: (128, 0, 128), 8: (0, 128, 128)}
# The actions' moves as (dx, dy), x the column and y the row (down is +y).
MOVES = ((0, 0), (0, 1), (0, -1), (1, 0), (-1, 0))

# The pads of each task's room as rectangles (pad, rows [r0, r1), columns [c0, c1)) in
# the room's cells (row 0 and column 0 are walls); the room is otherwise empty.
_SHARED_SEVEN = ((1, 1, 3, 1, 4), (1, 3, 4, 1, 3), (2, 10, 13, 13, 15), (2, 11, 13, 12, 13),
                 (3, 5, 9, 1, 3), (4, 1, 3, 12, 15), (4, 3, 4, 13, 15), (5, 5, 9, 13, 15),
                 (6, 10, 13, 1, 3), (6, 11, 13, 3, 4), (7, 11, 13, 6, 10))
LAYOUTS: dict[str, tuple[tuple[int, int, int, int, int], ...]] = {
    "three": ((1, 1, 5, 1, 5), (2, 9, 13, 6, 10), (3, 1, 5, 11, 15)),
    "four": ((1, 1, 5, 1, 5), (2, 9, 13, 11, 15), (3, 9, 13, 1, 5), (4, 1, 5, 11, 15)),
    "five": ((1, 2, 6, 1, 4), (2, 10, 13, 11, 15), (3, 8, 12, 1, 4), (4, 1, 4, 11, 15),
             (5, 5, 9, 12, 15)),
    "six": ((1, 1, 4, 1, 4), (2, 10, 13, 12, 15), (3, 5, 9, 1, 3), (4, 10, 13, 1, 4),
            (5, 1, 4, 12, 15), (6, 5, 9, 13, 15)),
    "seven": _SHARED_SEVEN,
    "eight": (*_SHARED_SEVEN, (8, 1, 3, 6, 10)),
}


def room(task: str) -> np.ndarray:
    """The task's room [HEIGHT, WIDTH] int8: -1 wall, 0 floor, k pad k."""
    grid = np.full((HEIGHT, WIDTH), -1, np.int8)
    grid[1:-1, 1:-1] = 0
    for pad, r0, r1, c0, c1 in LAYOUTS[task]:
        grid[r0:r1, c0:c1] = pad
    return grid


class PinPadEnv(HostEnv):
    def __init__(self, task: str, env_id: str | None = None, length: int = 10000):
        env_id = env_id or f"pinpad_{task}"
        if task not in LAYOUTS:
            raise ValueError(f"--env {env_id}: unknown PinPad task {task!r}; tasks: "
                             f"{', '.join(f'pinpad_{t}' for t in LAYOUTS)}")
        if length < 1:
            raise ValueError(f"--env {env_id}: length must be >= 1, got {length}")
        self.grid = room(task)
        self.length = int(length)
        self.target = tuple(range(1, int(self.grid.max()) + 1))
        # Free cells as (x, y), x-major: the order the reference draws spawns from.
        xs, ys = np.nonzero(self.grid.T >= 0)
        self.spawns = list(zip(xs.tolist(), ys.tolist(), strict=True))
        self.random = np.random.RandomState()
        self.player = (0, 0)
        self.sequence: list[int] = []
        self.steps = 0
        self.countdown = 0
        self.spec = HostSpec(
            env_id=env_id,
            obs_space=check_obs_space(env_id, (("image", (64, 64, 3), "uint8"),)),
            discrete=True, num_actions=len(MOVES), action_dims=0, episode_limit=self.length)

    def _respawn(self) -> None:
        self.player = self.spawns[self.random.randint(len(self.spawns))]
        self.sequence = []

    def reset(self, seed: int | None = None):
        if seed is not None:
            self.random = np.random.RandomState(int(seed))
        self._respawn()
        self.steps = 0
        self.countdown = 0
        return {"image": self.render()}

    def step(self, action):
        if self.countdown:
            self.countdown -= 1
            if not self.countdown:
                self._respawn()
        dx, dy = MOVES[int(action)]
        x = min(max(self.player[0] + dx, 0), WIDTH - 1)
        y = min(max(self.player[1] + dy, 0), HEIGHT - 1)
        cell = int(self.grid[y, x])
        if cell >= 0:
            self.player = (x, y)
        if cell > 0 and (not self.sequence or self.sequence[-1] != cell):
            self.sequence = [*self.sequence, cell][-len(self.target):]
        reward = 0.0
        if tuple(self.sequence) == self.target and not self.countdown:
            reward = REWARD
            self.countdown = COUNTDOWN
        self.steps += 1
        return {"image": self.render()}, reward, False, self.steps >= self.length, {}

    def render(self) -> np.ndarray:
        """The observation: [64, 64, 3] uint8 (module docstring)."""
        cells = np.full((WIDTH, WIDTH, 3), 255, np.uint8)  # the room and two bar rows
        if self.countdown:
            cells[:] = COUNTDOWN_BACKGROUND
        room_ = cells[:HEIGHT]
        room_[self.grid < 0] = WALL
        here = int(self.grid[self.player[1], self.player[0]])
        for pad, color in PAD_COLORS.items():
            c = np.array(color)
            # Faded: a tenth of the colour on white, truncated to integers.
            room_[self.grid == pad] = c if pad == here else (10 * c + 90 * 255) // 100
        room_[self.player[1], self.player[0]] = 0
        cells[HEIGHT:] = WALL
        for i, pad in enumerate(self.sequence):
            cells[HEIGHT, 2 * i + 1] = PAD_COLORS[pad]
        return np.repeat(np.repeat(cells, CELL, 0), CELL, 1)


make = PinPadEnv  # the registry's constructor: make(task, env_id=..., **settings)
