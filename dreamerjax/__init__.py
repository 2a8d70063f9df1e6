"""dreamerjax: DreamerV3 in JAX, faithful to danijar/dreamerv3 @29eb964."""

from dreamerjax import xla_tuning as _xla_tuning

_xla_tuning.apply()  # before any JAX backend starts; DREAMERJAX_XLA_TUNING=0 turns it off

__version__ = "0.1.0"
