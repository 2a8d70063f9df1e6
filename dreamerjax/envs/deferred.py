"""Modules a dependency imports at its top but uses only when drawing, loaded on first use.

gymnax's package import runs `import seaborn` (gymnax/environments/misc/pong.py, for the
colours of its render), and seaborn imports scipy.stats and pandas: about 90 MiB of RSS
in every training process (results/bench/LOG.md, "Peak RSS of a training process"), for
a module no training run touches. `defer("seaborn")` puts a stand-in into sys.modules
that imports the real module the first time one of its attributes is read and then
behaves as it; nothing is computed differently, only later. Likewise gymnax's bsuite
Catch runs `import matplotlib.pyplot` for its render: about 0.5 s of a run's start-up, in
the training process and again in its precompile child, whose programs wait for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


class _Deferred(types.ModuleType):
    def __getattr__(self, attr: str):
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = importlib.import_module(name)
        self.__dict__.update(real.__dict__)
        sys.modules[name] = real
        return getattr(real, attr)


def defer(name: str) -> None:
    """Stand in for module `name` (a submodule too: its package is imported) until an
    attribute of it is read (nothing when it is imported already or not installed)."""
    if name in sys.modules:
        return
    try:
        if importlib.util.find_spec(name) is None:
            return
    except ModuleNotFoundError:  # a submodule of a package that is not installed
        return
    stub = _Deferred(name)
    stub.__spec__ = None  # an import statement of a module in sys.modules reads this
    sys.modules[name] = stub
