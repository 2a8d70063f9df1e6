"""Callbacks as `dreamerjax.train` takes them: a `Callback` (an object with `name`,
`on_log`, `state_dict` and `load_state_dict`, whose state is kept in the checkpoint), or a
plain function called with each log point (brax's progress_fn), which keeps no state; and
the LogPoint each is handed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from dreamerjax.config.defaults import Config

_PROTOCOL = ("name", "on_log", "state_dict", "load_state_dict")


@dataclasses.dataclass(frozen=True)
class FunctionCallback:
    """A function of one LogPoint as a Callback: called at every log point, no state."""

    fn: Callable[[Any], Any]
    name: str

    def on_log(self, point) -> None:
        self.fn(point)

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: Mapping) -> None:
        del state


def as_callbacks(callbacks: Sequence[Any]) -> tuple:
    """train()'s callbacks as Callbacks: a full Callback as it is; a function, or an object
    with only `on_log`, wrapped (FunctionCallback). TypeError naming `callbacks[i]` for
    anything else, before anything is built."""
    if callable(callbacks) or isinstance(callbacks, str | bytes):
        raise TypeError("callbacks must be a sequence (callbacks=[fn]), got "
                        f"{type(callbacks).__name__}")
    out = []
    for i, cb in enumerate(callbacks):
        if all(hasattr(cb, attr) for attr in _PROTOCOL):
            out.append(cb)
        elif callable(getattr(cb, "on_log", None)):
            out.append(FunctionCallback(cb.on_log, str(getattr(cb, "name", type(cb).__name__))))
        elif callable(cb):
            name = getattr(cb, "__qualname__", type(cb).__name__)
            out.append(FunctionCallback(cb, f"{name}#{i}"))
        else:
            raise TypeError(f"callbacks[{i}]: a function of one LogPoint or a "
                            f"dreamerjax.Callback, got {type(cb).__name__}")
    return tuple(out)


@dataclasses.dataclass
class LogPoint:
    """What a log point hands to callbacks (host values).

    records: one dict per seed (records.jsonl lines); a callback may add fields.
    episodes: the training episodes finished in this interval (episodes.jsonl lines).
    """

    log_index: int
    rows: int
    seeds: tuple[int, ...]
    num_envs: int
    records: list[dict]
    episodes: list[dict]
    config: Config


class Callback(Protocol):
    """Observer of a run (brax's progress_fn, with state that survives a resume)."""

    name: str

    def on_log(self, point: LogPoint) -> None: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: Mapping) -> None: ...
