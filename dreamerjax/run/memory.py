"""Memory before allocating: the replay's and the agents' sizes, checked against what the
machine has.

The replay is the state's bulk for small models: seeds x envs x capacity rows of
schema.replay_row_spec (observation, reward, flags, action, posterior deter and stoch);
for large ones with many seeds the agent's own state is (parameters, slow critic,
optimiser state). driver.train refuses a run whose replay, or whose replay and agent
states together, would not fit, with the figures, before anything is compiled or
allocated; `dreamerjax info` prints the replay's figure. With run.replay_memory host the
rows live in host memory (pinned), so host memory (MemAvailable) is what they are checked
against, and the device holds the agents and the batches sampled from the rows. The
update's own working memory is not counted: a run that passes can still run out while it
compiles or runs, and bench's sweep reads it from the compiled program instead.
"""

from __future__ import annotations

import math
import os

from dreamerjax.config.defaults import data_devices, fsdp_devices


def tree_bytes(tree) -> int:
    """Bytes of a tree of arrays or of their shapes (jax.ShapeDtypeStruct leaves)."""
    import jax

    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def row_bytes(setup) -> int:
    """Bytes of one replay row of a Setup (schema.replay_row_spec, no leading axes)."""
    from dreamerjax.data import schema

    rssm = setup.config.agent.rssm
    spec = schema.replay_row_spec(setup.spaces, rssm.deter, rssm.stoch)
    return tree_bytes(spec)


def replay_bytes(setup, num_seeds: int) -> int:
    """seeds x envs x capacity x row bytes."""
    return int(num_seeds) * setup.run.num_envs * setup.capacity * row_bytes(setup)


def fmt(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError  # pragma: no cover


def host_available() -> int:
    """MemAvailable of /proc/meminfo (what can be allocated without swapping), else the
    free physical pages."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def available(devices: int = 1) -> tuple[int, str]:
    """(bytes free for the replay over `devices` devices, where that figure comes from).
    Accelerators report their allocator's limit minus what is in use; the CPU backend's
    arrays live in host memory."""
    import jax

    # This process's own devices: a multi-host run cannot query the others' memory.
    devs = jax.local_devices()[:max(1, devices)]
    stats = [d.memory_stats() if hasattr(d, "memory_stats") else None for d in devs]
    if devs[0].platform != "cpu" and all(s and "bytes_limit" in s for s in stats):
        free = min(s["bytes_limit"] - s.get("bytes_in_use", 0) for s in stats)
        return free * len(devs), f"free on {len(devs)} {devs[0].platform} device(s)"
    return host_available(), HOST_WHERE


HOST_WHERE = "available host memory (/proc/meminfo MemAvailable)"


def batch_bytes(setup) -> int:
    """Bytes of one sampled batch's rows (batch_size x window length rows): what a step
    of training moves from a host replay to the device."""
    return setup.run.batch_size * setup.window_length * row_bytes(setup)


def describe(setup, num_seeds: int) -> str:
    """One line: the replay's figure and its factors, and where it lives."""
    where = ("in host memory (run.replay_memory=host)" if setup.run.replay_memory == "host"
             else "in device memory (run.replay_memory=device)")
    return (f"replay: {num_seeds} seeds x {setup.run.num_envs} envs x {setup.capacity:,} "
            f"rows x {row_bytes(setup):,} bytes = {fmt(replay_bytes(setup, num_seeds))} "
            f"{where}")


def agent_bytes(setup) -> int:
    """Bytes of one seed's agent state (algo.agent.AgentState: parameters, slow critic,
    optimiser state, normalisers), from its shapes: nothing is allocated."""
    from dreamerjax.algo import agent as agent_lib

    return tree_bytes(agent_lib.state_shapes(setup.config.agent, setup.spaces))


def check_replay(setup, num_seeds: int, devices: int = 1, local: int | None = None) -> int:
    """Raise MemoryError when the replay alone exceeds the memory free for it, or when the
    agents' states and a device replay together exceed the devices' memory; returns the
    replay's size in bytes. devices: --devices (groups of seeds); each seed's replay is
    split over its data devices too (jax.train_devices), so the memory of devices x data
    devices holds it, and its agent state is held by each of them (split over the FSDP
    ones, jax.train_mesh). local: of those, the devices of this process (a run over
    several processes, each holding the replay rows of its own devices' envs); None: all.
    A host replay (run.replay_memory host) is checked against this process's host memory
    instead; a device replay that does not fit where the host has room is told of
    `--set run.replay_memory=host`."""
    need = replay_bytes(setup, num_seeds)
    total = devices * data_devices(setup.run)
    local = total if local is None else local
    share = need * local // total
    host = setup.run.replay_memory == "host"
    on_device, device_where = available(local)
    have, where = (host_available(), HOST_WHERE) if host else (on_device, device_where)
    part = "" if local == total else (
        f" (this process's {local} of {total} devices: {fmt(share)})")
    if share > have:
        hint = ""
        if not host and where != HOST_WHERE and share <= host_available():
            hint = (f"; or keep it in host memory, which has room "
                    f"({fmt(host_available())}): --set run.replay_memory=host")
        raise MemoryError(
            f"{describe(setup, num_seeds)}{part} does not fit: {fmt(have)} {where}. Lower "
            "--steps (the replay keeps every row unless replay_capacity is set), "
            f"--num-envs or the number of seeds, or set run.replay_capacity{hint}")
    # each seed's state on each of its data devices, split over the FSDP ones
    per_seed = agent_bytes(setup)
    data, fsdp = data_devices(setup.run), fsdp_devices(setup.run)
    agents = per_seed * num_seeds * data // fsdp * local // total
    if agents + (0 if host else share) > on_device:
        mine = "" if local == total else f" on this process's {local} of {total} devices"
        beside = "" if host else f" beside the {fmt(share)} replay"
        raise MemoryError(
            f"agent state: {num_seeds} seeds x {fmt(per_seed)} (parameters, slow critic, "
            f"optimiser state) = {fmt(agents)}{mine}{beside} does not fit: "
            f"{fmt(on_device)} {device_where}. Use fewer --seeds, a smaller --size, or "
            "more devices (--devices)")
    return need
