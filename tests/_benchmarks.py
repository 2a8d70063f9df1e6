"""Modules of benchmarks/ imported by their path (benchmarks/ is not a package): one loader
for the tests that check a benchmark's or the reference harness's pure parts."""

import importlib.util
import pathlib

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def load(relpath: str):
    """benchmarks/<relpath> as a fresh module, named after its path."""
    path = BENCHMARKS / relpath
    name = "bench_" + relpath.removesuffix(".py").replace("/", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
