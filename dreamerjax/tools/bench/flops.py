"""FLOPs of one update: counted by a backend's cost analysis with every scan unrolled
(update_flops), by hand for the dense matmuls (analytic_flops), and a point's achieved
FLOP/s against the device's peak (with_flops)."""

from __future__ import annotations

import contextlib

from dreamerjax.tools import accelerators
from dreamerjax.tools.bench.programs import abstract_states, update_program


@contextlib.contextmanager
def unrolled_scans(steps: int | bool = True, within: str = ""):
    """While inside: every jax.lax.scan traced from a module whose name starts with
    `within` ("" for all) unrolls `steps` steps (True: fully, for counting FLOPs; a
    number: the lever benchmarks/scan_unroll.py times); other scans keep their own."""
    import sys

    import jax
    orig = jax.lax.scan

    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kw):
        if sys._getframe(1).f_globals.get("__name__", "").startswith(within):
            unroll = steps
        return orig(f, init, xs, length, reverse=reverse, unroll=unroll, **kw)

    jax.lax.scan = scan
    try:
        yield
    finally:
        jax.lax.scan = orig


def _cost(stage) -> dict:
    ca = stage.cost_analysis()
    return ca[0] if isinstance(ca, list | tuple) else ca


def analytic_flops(setup) -> dict:
    """Hand count of the dense matmuls (2 FLOPs per multiply-add) of one update's RSSM
    rollouts: imagination (forward only; its params are stop-gradiented) and the observe
    scan (forward + backward ~ 3x forward). Elementwise work is left out."""
    cfg, run, sp = setup.config.agent, setup.run, setup.spaces
    r = cfg.rssm
    D, H, G, SC = r.deter, r.hidden, r.blocks, r.stoch * r.classes
    A = sp.act_dim
    gru = D * H + SC * H + A * H + (D // G + 3 * H) * D + (r.dynlayers - 1) * D * D // G
    gru += 3 * D * D // G  # dyncore
    prior = D * H + (r.imglayers - 1) * H * H + H * SC
    F, U = D + SC, cfg.actor.units
    actor = F * U + (cfg.actor.layers - 1) * U * U + U * A
    embed = cfg.enc.units
    post = (embed if r.absolute else D + embed) * H + (r.obslayers - 1) * H * H + H * SC
    B, T, N = run.batch_size, run.batch_length, run.batch_size * run.batch_length
    imagine = 2 * N * (cfg.imag_length * (gru + prior + actor) + actor)
    observe = 3 * 2 * B * T * (gru + post)
    return {"imagination": float(imagine), "observe_fwd_bwd": float(observe)}


def update_flops(setup) -> tuple[float | None, str]:
    """(FLOPs of one seed's update with every scan step counted, their source): the
    update program lowered with every lax.scan unrolled (pre-optimisation HLO; XLA counts
    a rolled loop's body once), by the running backend's cost analysis or else the CPU's
    (accelerators.program_flops)."""
    import jax
    program = update_program(setup)
    states = abstract_states(setup, 1)
    # JAX keeps the traces of jitted functions (loop._update's among them): one traced
    # rolled would be reused here, one traced unrolled by the programs that come after.
    jax.clear_caches()
    try:
        with unrolled_scans():
            return accelerators.program_flops(program, (states,))
    finally:
        jax.clear_caches()


def with_flops(point: dict, flops: float | None, source: str, device_kind: str) -> dict:
    """The point's FLOPs per update, achieved FLOP/s (of every seed) and fraction of the
    device's peak (accelerators.peak_flops; None where no peak is known)."""
    import jax
    med = point["seconds_per_update"]["median"]
    achieved = flops * point["seeds"] / med if flops else None
    peak, assumption = accelerators.peak_flops(
        device_kind, point["dtype"], jax.config.jax_default_matmul_precision)
    return {**point, "flops_per_update": flops, "flops_source": source,
            "achieved_flops_per_s": achieved, "achieved_tflops_per_s":
            achieved / 1e12 if achieved else None,
            "peak_flops_per_s": peak, "peak_assumption": assumption,
            "fraction_of_peak": achieved / peak if achieved and peak else None}
