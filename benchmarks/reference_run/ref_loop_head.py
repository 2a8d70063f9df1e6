"""The reference's training loop at e3f0224 (embodied/run/train.py:9-128 @e3f0224), step
by step, with the three additions of docs/protocol.md section 3 marked ADDITION.

It calls the reference's own objects in the stock order: agent, replay and logger
(train.py:11-13), the update scheduler (24-25), the driver and its callbacks (57-62), the
two prefetching streams and carries (64-68), the per-transition train step (70-81), the
policy and the driver's reset (93-94) and the `driver(policy, steps=10)` loop (95-97),
each pass cut short where it would step past a record point (ticks.py). The loop body's
report, log and save branches (99-117) never fire with run.report_every, log_every and
save_every at 0 (embodied/core/clock.py:107-108 @e3f0224: zero is off), so they are
left out and run_reference_head.py refuses other values; the logger-only FPS, usage and
episode-statistics meters go with them. The stock checkpoint registration (83-90) is
run_reference_head.py's.

Differences from the 29eb964 loop (ref_loop.py) that are the reference's own: the train
gate is `len(replay) < batch_size * batch_length` items (train.py:71), there is no
`train_fill` and no exploration schedule (the policy always runs in mode 'train'), and
the batches come from `make_stream` (dreamerv3/main.py:261-272 @e3f0224) through
`agent.stream` (embodied/jax/agent.py:326-337 @e3f0224), whose seeds are counters, not
a shared generator.
"""

from __future__ import annotations

import collections
from functools import partial as bind

import elements
import embodied
from ticks import pass_steps


class TrainLoop:
    """make_env(index) -> (wrapped env, port env); the ports are kept for checkpoints.
    make_stream(replay, mode) is dreamerv3/main.py's with the config bound."""

    def __init__(self, make_agent, make_replay, make_env, make_stream, make_logger,
                 args) -> None:
        self.args = args
        self.agent = make_agent()
        self.replay = make_replay()
        self.logger = make_logger()
        elements.Path(args.logdir).mkdir()
        self.step = self.logger.step
        self.agg = elements.Agg()
        self.episodes = collections.defaultdict(elements.Agg)  # logger-only (train.py:20)

        self.batch_steps = args.batch_size * args.batch_length
        self.should_train = elements.when.Ratio(args.train_ratio / self.batch_steps)

        self.ports = []

        def env_fn(index):
            env, port = make_env(index)
            self.ports.append(port)
            return env

        fns = [bind(env_fn, i) for i in range(args.envs)]
        self.driver = embodied.Driver(fns, parallel=not args.debug)
        self.driver.on_step(lambda tran, _: self.step.increment())
        self.driver.on_step(self.replay.add)
        self.driver.on_step(self.log_step)

        agent = self.agent
        self.stream_train = iter(agent.stream(make_stream(self.replay, "train")))
        # Never read here (report is off) but built as stock: its prefetch thread draws
        # one batch (mode 'report', which leaves the online queue alone) and takes one
        # batch counter, as the stock loop's does.
        self.stream_report = iter(agent.stream(make_stream(self.replay, "report")))
        self.carry = [agent.init_train(args.batch_size)]
        self.carry_report = agent.init_report(args.batch_size)
        self.driver.on_step(self.train_step)

    def log_step(self, tran, worker) -> None:
        """Episode score and length to the logger (train.py:30-55)."""
        episode = self.episodes[worker]
        if tran["is_first"]:
            episode.reset()
        episode.add("score", tran["reward"], agg="sum")
        episode.add("length", 1, agg="sum")
        if tran["is_last"]:
            result = episode.result()
            self.logger.add({"score": result["score"], "length": result["length"]},
                            prefix="episode")

    def train_step(self, tran, worker) -> None:
        """Updates owed after this transition (train.py:70-81)."""
        args = self.args
        if len(self.replay) < args.batch_size * args.batch_length:
            return
        for _ in range(self.should_train(self.step)):
            batch = next(self.stream_train)
            self.carry[0], outs, mets = self.agent.train(self.carry[0], batch)
            if "replay" in outs:
                self.replay.update(outs["replay"])
            self.agg.add(mets, prefix="train")

    def start(self, restore=None) -> None:
        """The policy and the driver's reset (train.py:93-94); then `restore()` (a
        resumed run's checkpoint load; train.py:90 loads before the loop)."""
        agent = self.agent
        self.policy = lambda *a: agent.policy(*a, mode="train")
        self.driver.reset(agent.init_policy)
        if restore is not None:
            restore()

    def run(self, record, every: int, stop_after: int = 0) -> bool:
        """Train to args.steps; False when stopped at `stop_after` rows instead."""
        while self.step < self.args.steps:
            self.driver(self.policy, steps=pass_steps(int(self.step), every,
                                                      self.args.envs))
            # ADDITION 1: record at multiples of `every` rows, after the tick's updates.
            rows = int(self.step)
            if rows % every == 0:
                record(rows)
                if stop_after and rows >= stop_after and rows < self.args.steps:
                    return False
        return True

    def flush(self) -> None:
        """ADDITION 2: one env step with the actions the driver would send next
        (driver.py:56-59 @e3f0224): no policy call, no replay add, no training."""
        acts = self.driver.acts
        for i, env in enumerate(self.driver.envs):
            env.step({k: v[i] for k, v in acts.items()})
