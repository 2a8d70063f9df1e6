"""Sampling probabilities of the reference's replay selectors over a scripted history.

Run in the reference's own environment with its checkout on the path, unmodified:

    python gen_selectors.py REF_CHECKOUT VERSION OUT_DIR     # VERSION: 29eb964 or e3f0224

The history is the one a lockstep replay makes (tests/data/reference_replay/README.md):
E envs add one row each per tick, env-major; once an env holds `length` rows every added
row inserts the item (env, start) whose window ends there; before each insert the oldest
items are removed while the selector holds `capacity` items (embodied Replay._insert).
Samples call the selector (at e3f0224 a draw that the mixture sends to Recency raises,
recorded as event kind 3 and skipped); priority updates call its `prioritize` with the rows' step
ids. After some events the probability of every stored item is read from the selectors'
own state: Uniform 1 / len(keys); Recency the product of its tree's conditional
probabilities per drawn index, mapped to an item by the selector's own call (its `_sample`
replaced on the instance by a function returning that index); Prioritized by walking its
sample tree with the rules of SampleTree.sample (inf children first, then uniform when a
node's total is 0, else proportional); Mixture the sum over its selectors weighted by its
own float32 fractions.
"""

import importlib
import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
VERSION, OUT = sys.argv[2], sys.argv[3]
selectors = importlib.import_module(
    "embodied.replay.selectors" if VERSION == "29eb964" else "embodied.core.selectors")

E, L, CAP_ROWS = 2, 4, 10            # envs, window length, ring rows per env
CAPACITY = E * (CAP_ROWS - L + 1)     # items the lockstep ring holds (14)
TICKS = 30

CONFIGS = {
    # name: fracs, prio kwargs, recexp, prioritize events
    "mix": (dict(uniform=0.5, priority=0.3, recency=0.2),
            dict(exponent=0.8, maxfrac=0.5, initial=np.inf, zero_on_sample=True), 1.0),
    "prio": (dict(uniform=0.0, priority=1.0, recency=0.0),
             dict(exponent=0.6, maxfrac=0.3, initial=2.0, zero_on_sample=True), 1.0),
    "prio_keep": (dict(uniform=0.0, priority=1.0, recency=0.0),
                  dict(exponent=1.0, maxfrac=0.0, initial=1.0, zero_on_sample=False), 1.0),
    "recency": (dict(uniform=0.0, priority=0.0, recency=1.0),
                dict(exponent=0.8, maxfrac=0.5, initial=np.inf, zero_on_sample=True), 0.5),
}


def stepids(env, start):
    return np.array([[env, r] for r in range(start, start + L)], np.int32)


def recency_probs(sel, keys):
    tree, probs = sel.tree, {}
    bf = 16
    for a in range(len(sel.uprobs)):
        digits = [(a // bf ** (len(tree) - 1 - lv)) % bf for lv in range(len(tree))]
        p = 1.0
        for lv in range(len(tree)):
            p *= float(tree[lv][tuple(digits[:lv + 1])])
        if p == 0:
            continue
        sel._sample = lambda tree_, rng_, a=a: a
        try:
            key = sel()
        finally:
            del sel._sample
        probs[key] = probs.get(key, 0.0) + p
    return probs


def prio_probs(sel):
    probs = {}

    def walk(node, p):
        if not hasattr(node, "children"):
            probs[node.key] = probs.get(node.key, 0.0) + p
            return
        u = np.array([x.uprob for x in node.children], np.float64)
        total = u.sum()
        if not np.isfinite(total):
            q = np.isinf(u) / np.isinf(u).sum()
        elif total == 0:
            q = np.ones(len(u)) / len(u)
        else:
            q = u / total
        for child, qc in zip(node.children, q, strict=True):
            if qc > 0:
                walk(child, p * qc)

    if len(sel.tree):
        walk(sel.tree.root, 1.0)
    return probs


def mixture_probs(mix, recency, keys):
    total = {k: 0.0 for k in keys}
    for sel, frac in zip(mix.selectors, mix.fractions, strict=True):
        if isinstance(sel, selectors.Uniform):
            part = {k: 1.0 / len(sel.keys) for k in sel.keys}
        elif isinstance(sel, selectors.Recency):
            part = recency_probs(sel, keys)
        else:
            part = prio_probs(sel)
        for k, p in part.items():
            total[k] += float(frac) * p
    return total


def run(name, with_updates):
    fracs, prio, recexp = CONFIGS[name]
    rng = np.random.default_rng(63)
    recency = 1.0 / np.arange(1, CAPACITY + 1) ** recexp
    parts = dict(uniform=selectors.Uniform(seed=1),
                 priority=selectors.Prioritized(**prio, seed=2),
                 recency=selectors.Recency(recency, seed=3))
    mix = selectors.Mixture(dict(parts), dict(fracs), seed=4)
    items, order, itemid = {}, [], 0
    events, values, checks, check_events = [], [], [], []

    def check():
        if not items:
            return
        probs = mixture_probs(mix, parts["recency"], list(items))
        arr = np.zeros((E, CAP_ROWS), np.float64)
        for key, p in probs.items():
            env, start = items[key]
            arr[env, start % CAP_ROWS] += p
        checks.append(arr)
        check_events.append(len(events))

    for tick in range(TICKS):
        for env in range(E):
            if tick >= L - 1:
                while len(order) >= CAPACITY:
                    old = order.pop(0)
                    del mix[old]
                    del items[old]
                start = tick - L + 1
                items[itemid] = (env, start)
                order.append(itemid)
                mix[itemid] = stepids(env, start)
                itemid += 1
        events.append((0, tick, 0, 0))
        if tick >= L + 1 and tick % 3 == 0:
            check()
            for _ in range(3):
                state = (parts["priority"].tree.rng.bit_generator.state
                         if "priority" in [k for k, f in fracs.items() if f] else None)
                try:
                    key = mix()
                except UnboundLocalError:
                    # e3f0224's Recency._sample reads `segment` before assigning it
                    # (embodied/core/selectors.py:101-104): a recency draw raises.
                    events.append((3, 0, 0, 0))
                    continue
                picked = int(state is not None
                             and parts["priority"].tree.rng.bit_generator.state != state)
                env, start = items[key]
                events.append((1, env, start, picked))
            check()
        if with_updates and tick >= L + 2 and tick % 4 == 1:
            rows = [(e, r) for e in range(E) for r in range(max(0, tick - 6), tick + 1)]
            pick = rng.choice(len(rows), size=5, replace=False)
            ids, prios = [], []
            for i in pick:
                e, r = rows[i]
                v = float(rng.choice([0.0, rng.uniform(0.1, 3.0)], p=[0.2, 0.8]))
                ids.append(np.array([e, r], np.int32))
                prios.append(v)
                events.append((2, e, r, len(values)))
                values.append(v)
            mix.prioritize(np.stack(ids), prios)
            check()
    check()
    return dict(events=np.array(events, np.int32), values=np.array(values, np.float64),
                probs=np.stack(checks), check_events=np.array(check_events, np.int32))


out = {}
for name in CONFIGS:
    for upd in ([True, False] if VERSION == "29eb964" else [False]):
        tag = name + ("_updates" if upd else "")
        for k, v in run(name, upd).items():
            out[f"{tag}/{k}"] = v
meta = dict(envs=E, length=L, cap_rows=CAP_ROWS, capacity=CAPACITY, ticks=TICKS)
for k, v in meta.items():
    out[f"meta/{k}"] = np.array(v)
for name, (fracs, prio, recexp) in CONFIGS.items():
    for k, v in fracs.items():
        out[f"config/{name}/fracs/{k}"] = np.array(v)
    for k, v in prio.items():
        out[f"config/{name}/prio/{k}"] = np.array(v)
    out[f"config/{name}/recexp"] = np.array(recexp)
np.savez_compressed(f"{OUT}/selectors_{VERSION}.npz", **out)
print("wrote", f"{OUT}/selectors_{VERSION}.npz", len(out), "arrays")
