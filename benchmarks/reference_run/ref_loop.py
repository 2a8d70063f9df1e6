"""The reference's training loop (embodied/run/train.py:9-128 at 29eb964), step by step,
with the three additions of docs/protocol.md section 3 marked ADDITION.

It calls the reference's own objects in the stock order: agent, replay and logger
(train.py:11-13), the update scheduler (26-28), the driver and its callbacks (67-72, 92),
the two prefetching datasets and carries (74-79), the per-transition train step (81-91),
the policy (104-106) and the `driver(policy, steps=10)` loop (107-109), each pass cut short
where it would step past a record point (why, and why nothing else moves: ticks.py). The
loop body's report, log and save branches (111-126) never fire with run.eval_every,
log_every and save_every at -1 (when.Clock, embodied/core/when.py:77-78), so they are left
out and harness.py refuses other values; the logger-only FPS and usage meters go with
them.
"""

from __future__ import annotations

from collections import defaultdict
from functools import partial as bind

import embodied
from ticks import pass_steps


class TrainLoop:
    """make_env(index) -> (wrapped env, port env); the ports are kept for checkpoints."""

    def __init__(self, make_agent, make_replay, make_env, make_logger, args) -> None:
        self.args = args
        self.agent = make_agent()
        self.replay = make_replay()
        self.logger = make_logger()
        embodied.Path(args.logdir).mkdir()
        self.step = self.logger.step
        self.agg = embodied.Agg()
        self.scores = defaultdict(embodied.Agg)  # logger-only episode sums (train.py:22)

        batch_steps = args.batch_size * (args.batch_length - args.replay_context)
        self.batch_steps = batch_steps
        self.should_expl = embodied.when.Until(args.expl_until)
        self.should_train = embodied.when.Ratio(args.train_ratio / batch_steps)

        self.ports = []

        def env_fn(index):
            env, port = make_env(index)
            self.ports.append(port)
            return env

        fns = [bind(env_fn, i) for i in range(args.num_envs)]
        self.driver = embodied.Driver(fns, args.driver_parallel)
        self.driver.on_step(lambda tran, _: self.step.increment())
        self.driver.on_step(self.replay.add)
        self.driver.on_step(self.log_step)

        agent = self.agent
        self.dataset_train = iter(agent.dataset(bind(
            self.replay.dataset, args.batch_size, args.batch_length)))
        # Never read here (report is off) but built as stock: its prefetch thread draws
        # from the online queue (docs/protocol.md section 6, "Report prefetch").
        self.dataset_report = iter(agent.dataset(bind(
            self.replay.dataset, args.batch_size, args.batch_length_eval)))
        self.carry = [agent.init_train(args.batch_size)]
        self.carry_report = agent.init_report(args.batch_size)
        self.driver.on_step(self.train_step)

    def log_step(self, tran, worker) -> None:
        """Episode score and length to the logger (train.py:33-61; the first row's reward
        is reset away, so length counts env steps)."""
        episode = self.scores[worker]
        episode.add("score", tran["reward"], agg="sum")
        episode.add("length", 1, agg="sum")
        if tran["is_first"]:
            episode.reset()
        if tran["is_last"]:
            result = episode.result()
            self.logger.add({"score": result["score"], "length": result["length"]},
                            prefix="episode")

    def train_step(self, tran, worker) -> None:
        """Updates owed after this transition (train.py:81-91)."""
        args, step = self.args, self.step
        if len(self.replay) < args.batch_size or step < args.train_fill:
            return
        for _ in range(self.should_train(step)):
            batch = next(self.dataset_train)
            outs, self.carry[0], mets = self.agent.train(batch, self.carry[0])
            if "replay" in outs:
                self.replay.update(outs["replay"])
            self.agg.add(mets, prefix="train")

    def start(self, restore=None) -> None:
        """The policy and the driver's reset (train.py:104-106); then `restore()` (a
        resumed run's checkpoint load), after every construction-time draw of agent.rng."""
        agent, step = self.agent, self.step
        self.policy = lambda *a: agent.policy(
            *a, mode="explore" if self.should_expl(step) else "train")
        self.driver.reset(agent.init_policy)
        if restore is not None:
            restore()

    def run(self, record, every: int, stop_after: int = 0) -> bool:
        """Train to args.steps; False when stopped at `stop_after` rows instead."""
        while self.step < self.args.steps:
            self.driver(self.policy, steps=pass_steps(int(self.step), every,
                                                      self.args.num_envs))
            # ADDITION 1: record at multiples of `every` rows, after the tick's updates.
            rows = int(self.step)
            if rows % every == 0:
                record(rows)
                if stop_after and rows >= stop_after and rows < self.args.steps:
                    return False
        return True

    def flush(self) -> None:
        """ADDITION 2: one env step with the actions the driver would send next
        (driver.py:56-64): no policy call, no replay add, no training; it finishes the
        episodes that end on the row our side's last tick steps to."""
        acts = self.driver.acts
        for i, env in enumerate(self.driver.envs):
            env.step({k: v[i] for k, v in acts.items()})
