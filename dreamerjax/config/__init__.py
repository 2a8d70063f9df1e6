"""Configuration, the bottom room: it imports nothing else of the package.

defaults.py holds the frozen dataclasses with the reference's defaults and the size
presets; keys.py maps the reference's dotted keys onto them, composes named configs and
resolves `--config` / `--configs` / `--set` with provenance.
"""
