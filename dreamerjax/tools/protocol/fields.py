"""S2 while a run trains: the protocol's record fields (section 5.1), attached to a run as
a driver callback (`dreamerjax train --protocol`, run.protocol)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping

from dreamerjax.tools.protocol.inputs import OUR_SIDE
from dreamerjax.tools.protocol.statistics import S2_WINDOW


class EpisodeTracker:
    """Finished training episodes per seed and env, and the S2 statistic over them.

    Episodes are identified by row_last, the 0-based per-env row index of the episode's
    is_last row. Per env they must arrive in completion order (strictly increasing
    row_last). State is plain lists, serialisable with to_dict / from_dict.
    """

    def __init__(self) -> None:
        # seed -> worker -> ([row_last ...], [score ...]), both in completion order.
        self._episodes: dict[int, dict[int, tuple[list[int], list[float]]]] = {}

    def add(self, seed: int, worker: int, row_last: int, length: int, score: float,
            terminal: bool) -> None:
        """Record one finished episode. length / terminal are accepted for symmetry with
        episodes.jsonl; S2 needs only row_last and score."""
        del length, terminal
        rows, scores = self._episodes.setdefault(int(seed), {}).setdefault(
            int(worker), ([], []))
        row_last = int(row_last)
        if rows and row_last <= rows[-1]:
            raise ValueError(
                f"EpisodeTracker.add: seed {seed} worker {worker}: row_last {row_last} is "
                f"not after the previous episode's {rows[-1]} (episodes must come in "
                "completion order)")
        rows.append(row_last)
        scores.append(float(score))

    def add_rows(self, rows: Iterable[Mapping]) -> None:
        """Add episodes.jsonl-style dicts."""
        for r in rows:
            self.add(r["seed"], r["worker"], r["row_last"], r.get("length", 0), r["score"],
                     r.get("terminal", False))

    def seeds(self) -> list[int]:
        return sorted(self._episodes)

    def count(self, seed: int, worker: int) -> int:
        return len(self._episodes.get(int(seed), {}).get(int(worker), ([], []))[0])

    def s2(self, seed: int, n_rows: int, num_envs: int) -> float:
        """S2(N) of one seed (protocol 5.2), N = n_rows total rows of the seed.

        For env w, E_w = its episodes with row_last <= N / num_envs (inclusive: the
        episode ending in row N / num_envs is finished by the env step of tick
        N / num_envs - 1, the last tick before the log point); m_w = the mean score of
        the last min(10, |E_w|) of them; S2 = mean over the num_envs envs of m_w, or NaN
        if any env has no such episode.
        """
        if n_rows % num_envs:
            raise ValueError(f"n_rows {n_rows} is not a multiple of num_envs {num_envs}")
        limit = n_rows // num_envs
        per_env = self._episodes.get(int(seed), {})
        means = []
        for w in range(num_envs):
            rows, scores = per_env.get(w, ([], []))
            k = bisect.bisect_right(rows, limit)
            if k == 0:
                return math.nan
            window = scores[max(0, k - S2_WINDOW):k]
            means.append(sum(window) / len(window))
        return math.fsum(means) / len(means)

    def s2_by_seed(self, n_rows: int, num_envs: int, seeds: Iterable[int]
                   ) -> dict[int, float]:
        return {int(s): self.s2(s, n_rows, num_envs) for s in seeds}

    def prune(self, n_rows: int, num_envs: int) -> None:
        """Forget episodes no query at N' >= n_rows can need (keeps state small).

        Per env, of the episodes with row_last <= n_rows / num_envs only the last 10 stay.
        """
        limit = n_rows // num_envs
        for per_env in self._episodes.values():
            for w, (rows, scores) in per_env.items():
                k = bisect.bisect_right(rows, limit)
                drop = max(0, k - S2_WINDOW)
                if drop:
                    per_env[w] = (rows[drop:], scores[drop:])

    def to_dict(self) -> dict:
        """JSON-ready state: {"seeds": {seed: {worker: [[row_last...], [score...]]}}}."""
        return {"seeds": {str(s): {str(w): [list(r), list(sc)] for w, (r, sc) in d.items()}
                          for s, d in self._episodes.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> EpisodeTracker:
        tracker = cls()
        for s, per_env in d.get("seeds", {}).items():
            tracker._episodes[int(s)] = {
                int(w): ([int(r) for r in rows], [float(x) for x in scores])
                for w, (rows, scores) in per_env.items()}
        return tracker


class ProtocolFields:
    """Driver callback adding the protocol's record fields (section 5.1) to every record:
    side "dreamerjax", s2_logged (S2 at the log point, from the training episodes seen so
    far) and train_raw (the metric names as logged; ours are the reference's). Its state
    (the episode tracker, pruned) travels in the checkpoint, so a resumed run logs the
    same S2."""

    name = "protocol"

    def __init__(self) -> None:
        self.tracker = EpisodeTracker()

    def on_log(self, point) -> None:
        self.tracker.add_rows(point.episodes)
        for r in point.records:
            r["side"] = OUR_SIDE
            r["s2_logged"] = _finite_or_none(
                self.tracker.s2(r["seed"], point.rows, point.num_envs))
            r["train_raw"] = dict(r["train"])
        self.tracker.prune(point.rows, point.num_envs)

    def state_dict(self) -> dict:
        return self.tracker.to_dict()

    def load_state_dict(self, state) -> None:
        self.tracker = EpisodeTracker.from_dict(state)


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None

