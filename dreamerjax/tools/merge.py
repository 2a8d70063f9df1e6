"""Runs split by seed, joined into one results folder: `dreamerjax merge RUN ... --out DIR`.

Seeds never interact (docs/deviations.md D4: each keeps its own state, keys from
PRNGKey(seed)), so the seeds of one experiment may be trained as separate runs, one
process or machine each (`--seeds 0`, `--seeds 1`, ...), and joined afterwards. The joined
folder holds what `summary`, `compare` and the plots read: records.jsonl and
episodes.jsonl with every seed's lines, and config.json with the shared config and the
union of the seeds. It is for reading, not resuming: checkpoints and tb/ stay in the runs.

Refused with ValueError naming the run and the key: configs that differ in anything but
their seeds, a seed in two runs, a run without config or records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from dreamerjax.run.records import (
    CONFIG_FILE,
    EPISODES_FILE,
    RECORDS_FILE,
    dumps,
    flatten,
    read_episodes,
    read_records,
)


def _raw_config(run_dir: Path) -> dict:
    path = run_dir / CONFIG_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the run's config ({e})") from e


def _differing_key(a: dict, b: dict) -> str | None:
    """The first dotted key (sorted) whose value differs between two configs."""
    fa, fb = flatten(a, sep="."), flatten(b, sep=".")
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key, "<absent>") != fb.get(key, "<absent>"):
            return key
    return None


def joined(run_dirs: Sequence[str | os.PathLike]) -> tuple[dict, list[dict], list[dict]]:
    """(config, records, episodes) of the runs joined.

    config: the first run's, with "seeds" the union in the order given; records sorted by
    (rows, seed), as a multi-seed run writes them; episodes by (seed, row_last, worker).
    """
    runs = [Path(r) for r in run_dirs]
    if not runs:
        raise ValueError("merge needs at least one run")
    first = _raw_config(runs[0])
    seeds: list[int] = []
    records: list[dict] = []
    episodes: list[dict] = []
    for run in runs:
        cfg = _raw_config(run)
        own = [int(s) for s in cfg.pop("seeds", ())]
        key = _differing_key({k: v for k, v in first.items() if k != "seeds"}, cfg)
        if key is not None:
            raise ValueError(f"{run}: config key {key} differs from {runs[0]}'s; only the "
                             "seeds may differ between runs that are merged")
        again = sorted(set(own) & set(seeds))
        if again:
            raise ValueError(f"{run}: seeds {again} are already in an earlier run")
        recs = read_records(run)
        if not recs:
            raise ValueError(f"{run / RECORDS_FILE}: no records")
        strays = sorted({int(r["seed"]) for r in recs} - set(own))
        if strays:
            raise ValueError(f"{run / RECORDS_FILE}: records of seeds {strays} that its "
                             f"config.json does not list ({own})")
        seeds += own
        records += recs
        episodes += read_episodes(run)
    records.sort(key=lambda r: (int(r["rows"]), int(r["seed"])))
    episodes.sort(key=lambda e: (int(e["seed"]), int(e["row_last"]), int(e["worker"])))
    return {**first, "seeds": seeds}, records, episodes


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def merge(run_dirs: Sequence[str | os.PathLike], out: str | os.PathLike) -> dict:
    """Write the joined config.json, records.jsonl and episodes.jsonl into `out` (each
    replaced whole, via a temporary file); returns counts for the command's line."""
    out = Path(out)
    if (out / "checkpoints").exists():
        raise ValueError(f"{out}: holds a run's checkpoints; merge into a folder of its own")
    config, records, episodes = joined(run_dirs)
    out.mkdir(parents=True, exist_ok=True)
    _write_atomic(out / CONFIG_FILE, dumps(config, indent=2, sort_keys=True) + "\n")
    _write_atomic(out / RECORDS_FILE, "".join(dumps(r) + "\n" for r in records))
    _write_atomic(out / EPISODES_FILE, "".join(dumps(e) + "\n" for e in episodes))
    return {"seeds": config["seeds"], "records": len(records), "episodes": len(episodes)}
