"""benchmarks/reference_run/gymnax_ports.py imported by its path (benchmarks/ is not a
package): the reference harness's physics, which has no embodied import, for the port tests
(test_reference_pendulum_port.py, test_reference_acrobot_port.py)."""

import importlib.util
import pathlib

PATH = (pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "reference_run"
        / "gymnax_ports.py")
_spec = importlib.util.spec_from_file_location("reference_run_gymnax_ports", PATH)
ports = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ports)
