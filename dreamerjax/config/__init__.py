"""Configuration, the bottom room: it imports nothing else of the package.

defaults.py holds the frozen dataclasses with the reference's defaults and the size
presets; versions.py what e3f0224 changes; keys.py the tables of the reference's dotted
keys and the named configs; dotted.py the dotted form and config files; resolve.py the
resolution of `--config` / `--configs` / `--set` with provenance (make_config, a resumed
run's merge); validate.py the one check of a run's values; docs_tables.py the printing.
"""
