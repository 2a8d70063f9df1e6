"""What is known of an accelerator beyond what JAX reports: its memory and peak FLOP/s by
`device.device_kind`, the FLOPs of a program whatever the backend's cost analysis gives,
and the one-line account of the devices that `dreamerjax info` and `dreamerjax bench` print.

Peaks are the vendors' dense figures (no sparsity). A TPU computes a float32 matmul on its
bfloat16 units in passes set by the matmul precision in effect
(`jax_default_matmul_precision`; dreamerjax leaves it unset): DEFAULT takes one bfloat16
pass, so its float32 peak is the bfloat16 one; HIGH takes 3 and HIGHEST 6 (peak / 3,
peak / 6). A GPU's float32 figure is its non-tensor-core rate; XLA may run float32 matmuls
as TF32 on tensor cores at DEFAULT precision, so a float32 fraction of peak above 1 is
possible there. A CPU has no entry: its peak is measured (bench.matmul_peak).
"""

from __future__ import annotations

import dataclasses
import functools
import os

GiB = 2**30


@dataclasses.dataclass(frozen=True)
class Known:
    """An accelerator by a part of its device_kind. memory: bytes of one device (None:
    JAX's memory_stats reports it); bf16, f32: peak dense FLOP/s; f32_passes: bfloat16
    passes of a float32 matmul at DEFAULT precision (TPU), 0 where f32 is its own rate."""

    kind: str
    memory: int | None
    bf16: float
    f32: float
    f32_passes: int = 0
    excludes: tuple[str, ...] = ()


KNOWN = (
    Known("TPU v5 lite", 16 * GiB, 197e12, 197e12, f32_passes=1),  # v5e's device_kind
    Known("TPU v5e", 16 * GiB, 197e12, 197e12, f32_passes=1),
    Known("TPU v4", 32 * GiB, 275e12, 275e12, f32_passes=1),
    Known("A100", None, 312e12, 19.5e12),
    Known("H100", None, 989e12, 67e12, excludes=("PCIe", "NVL")),  # the SXM part's figures
)
# bfloat16 passes of a float32 matmul on a TPU per jax_default_matmul_precision value.
PASSES = {None: 1, "default": 1, "bfloat16": 1, "fastest": 1, "high": 3, "bfloat16_3x": 3,
          "tensorfloat32": 3, "highest": 6, "float32": 6}


def known(device_kind: str) -> Known | None:
    """The table's entry of a device_kind (e.g. 'TPU v5 lite', 'NVIDIA A100-SXM4-40GB')."""
    for k in KNOWN:
        if k.kind in device_kind and not any(x in device_kind for x in k.excludes):
            return k
    return None


def peak_flops(device_kind: str, dtype: str, precision: str | None = None
               ) -> tuple[float | None, str]:
    """(peak dense FLOP/s of a device for matmuls in `dtype`, what the figure assumes);
    None where the device is not in the table (a CPU, an unlisted card)."""
    k = known(device_kind)
    if k is None:
        return None, f"no peak known for {device_kind!r}"
    if dtype == "bfloat16":
        return k.bf16, f"{k.kind}: {k.bf16 / 1e12:g} TFLOP/s bfloat16 (dense)"
    if k.f32_passes:
        passes = PASSES.get(precision, 1)
        return k.bf16 / passes, (
            f"{k.kind}: float32 matmuls as {passes} bfloat16 pass(es) at matmul precision "
            f"{precision or 'DEFAULT'}: {k.bf16 / 1e12:g} / {passes} TFLOP/s")
    return k.f32, f"{k.kind}: {k.f32 / 1e12:g} TFLOP/s float32 (non-tensor-core)"


def device_memory(device) -> tuple[int | None, str]:
    """(bytes of one device, where the figure comes from): the allocator's limit
    (memory_stats bytes_limit) where JAX reports it, else the table, else None."""
    stats = None
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]), "memory_stats bytes_limit"
    k = known(getattr(device, "device_kind", ""))
    if k is not None and k.memory is not None:
        return k.memory, f"table ({k.kind})"
    return None, "unknown"


# ----------------------------------------------------------------------------- backends

# JAX_PLATFORMS values that ask for an accelerator, and the extra that installs it.
_EXTRA = {"tpu": "tpu", "cuda": "cuda", "gpu": "cuda", "rocm": None}


def backend_error(environ=None) -> str | None:
    """One line when JAX cannot start the backend JAX_PLATFORMS asks for (a TPU-only or
    GPU-only request on a machine without one), saying what to change; None when it
    starts."""
    import jax
    environ = os.environ if environ is None else environ
    try:
        jax.devices()
    except RuntimeError as e:
        asked = environ.get("JAX_PLATFORMS", "")
        wanted = [p for p in asked.split(",") if p.strip() in _EXTRA]
        cause = " ".join(str(e).split()).split(" (set JAX_PLATFORMS")[0][:200]
        if not wanted:
            return f"JAX could not start a backend: {cause}"
        p = wanted[0].strip()
        extra = _EXTRA[p]
        install = (f"install it there with pip install -e '.[{extra}]' (docs/install.md)"
                   if extra else "install a ROCm build of jax there")
        return (f"JAX_PLATFORMS={asked} asks for a {p.upper()} this machine does not have "
                f"({cause}): unset JAX_PLATFORMS (or JAX_PLATFORMS=cpu) to run on the CPU, "
                f"or run on a machine with one and {install}")
    return None


def describe() -> list[str]:
    """Lines for `dreamerjax info`: the backend, each kind of device with its count and
    memory per device (memory_stats, else the table)."""
    import jax
    devs = jax.devices()
    lines = [f"Accelerator: {jax.default_backend()} (jax {jax.__version__}), "
             f"{len(devs)} device(s)"]
    kinds: dict[str, list] = {}
    for d in devs:
        kinds.setdefault(getattr(d, "device_kind", str(d)), []).append(d)
    for kind, ds in kinds.items():
        mem, where = device_memory(ds[0])
        if ds[0].platform == "cpu":
            from dreamerjax.run import memory
            shown = f"arrays in host memory ({memory.fmt(memory.host_available())} available)"
        elif mem is None:
            shown = "memory unknown"
        else:
            shown = f"{mem / GiB:.1f} GiB each ({where})"
        lines.append(f"  {len(ds)} x {kind} ({ds[0].platform}): {shown}")
    if jax.default_backend() == "cpu":
        lines.append("  no accelerator: on a TPU VM install with pip install -e '.[tpu]', "
                     "on a GPU machine with '.[cuda]' (docs/install.md)")
    return lines


# ----------------------------------------------------------------------------- FLOPs


def cost_flops(stage) -> float | None:
    """The 'flops' of a lowered or compiled program's cost_analysis(), whichever form it
    takes (a dict, a list of per-program dicts, or None where the backend gives none; a
    dict without 'flops', or a NotImplementedError, also gives None)."""
    try:
        ca = stage.cost_analysis()
    except NotImplementedError:
        return None
    if isinstance(ca, list | tuple):
        ca = ca[0] if ca else None
    if not isinstance(ca, dict) or ca.get("flops") is None:
        return None
    flops = float(ca["flops"])
    return flops if flops > 0 else None


def cpu_lowering(fn, *args):
    """fn (a jitted function) traced and lowered for the CPU backend with these (abstract)
    arguments: its cost analysis is XLA:CPU's, available whatever the default backend."""
    import jax
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):
        return fn.trace(*args).lower(lowering_platforms=("cpu",))


@functools.cache
def lowered_costs() -> bool:
    """Whether the running backend gives a lowered program's cost analysis (XLA:CPU does;
    the TPU and GPU plugins do not): probed once on a 2 x 2 matmul, so that a large
    program is not lowered for nothing."""
    import jax
    import jax.numpy as jnp
    x = jax.ShapeDtypeStruct((2, 2), jnp.float32)
    return cost_flops(jax.jit(lambda a: a @ a).trace(x).lower()) is not None


def program_flops(fn, args: tuple, stage=None) -> tuple[float | None, str]:
    """(FLOPs of one call of fn(*args), the source of the figure): `stage`'s cost analysis
    (a lowered or compiled program of fn on the running backend; None: fn lowered here)
    where the backend gives one, else the cost analysis of fn lowered for the CPU (the
    same function: the TPU and GPU plugins give none of a lowered program). fn: a jitted
    function; args: its arguments (ShapeDtypeStructs are enough)."""
    import jax
    if stage is None and lowered_costs():
        stage = fn.trace(*args).lower()
    flops = None if stage is None else cost_flops(stage)
    if flops is not None:
        return flops, f"{jax.default_backend()} cost analysis"
    flops = cost_flops(cpu_lowering(fn, *args))
    if flops is not None:
        return flops, "cpu lowering (the backend gives no cost analysis)"
    return None, "unavailable (no cost analysis on this backend or the CPU)"
