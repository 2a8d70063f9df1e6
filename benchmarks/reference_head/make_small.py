"""Write the small-shape HEAD (e3f0224) fixtures of tests/data/reference_head.

    REFVENV/bin/python benchmarks/reference_head/make_small.py REF OUT --family pert
    REFVENV/bin/python benchmarks/reference_head/make_small.py REF OUT --family pert --part loss

REF is danijar/dreamerv3 at e3f0224 (`git archive e3f0224 | tar -x -C REF`), imported
unmodified; REFVENV a virtual environment with HEAD's pins (CPU jax 0.4.33; the README of
tests/data/reference_head lists the versions). One family and part per process:

- `--part update` (`pert`, `image_pert`): the process starts with 2 host devices, builds
  HEAD's agent (`dreamerv3.agent.Agent`, the `embodied.jax.Agent` wrapper) with
  `jax.train_devices: [0, 1]` and calls its compiled train function `_train` twice, as
  `embodied.jax.Agent.train` does, under GSPMD: head_update_small{F}_dp2_s0.npz.
- `--part loss` (also `cont_pert_eps`): one jitted `Agent.loss` on one device, plus an
  instrumented call for the intermediates the parity checks read: head_loss_small{F}_s0.npz.

Both also write the family's config yaml and start state (head_config_small{F}_s0.yaml,
head_params_start_small{F}_s0.npz). The recipe is the size1m set's (sampling replaced by
the mode, no random draw traced, the same batches and perturbation), only the model is
smaller (SMALL). `--shape size1m` runs the same at HEAD's size1m preset; with `--check DIR`
it compares the result with DIR's files bit for bit instead of writing (a recipe check).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path

import numpy as np

# The model of the small families: every module of size1m, fewer units. The image stays
# 64 x 64: HEAD's decoder needs 3 <= image size / 16 with 4 CNN stages
# (dreamerv3/rssm.py:310-312 @e3f0224).
SMALL = {".*\\.rssm": {"deter": 64, "hidden": 16, "classes": 4, "stoch": 8, "blocks": 8},
         ".*\\.depth": 4, ".*\\.units": 16}
SHAPES = {"small": SMALL, "size1m": None}  # None: configs.yaml's own size1m preset

# Family tag -> (batch stream v of the README, observation keys and shapes, action classes).
# classes None: a continuous action of shape (2,) in [-1, 1]. `_eps`: the continuous sample
# is mean + 0.5 stddev (patch 3 with c = 0.5); the others sample the mode.
FAMILIES = {"pert": (0, {"vector": (4,)}, 2),
            "image_pert": (1, {"image": (64, 64, 3), "vector": (3,)}, 3),
            "cont_pert_eps": (2, {"vector": (5,)}, None)}
NOISE = {"cont_pert_eps": 0.5}

DRAW = 0
B, T = 4, 8

# The trained rows' episode flags (row = t + 1; row 0 is the replay-context row):
# (sequence, row) lists of is_first, of is_last (truncation or end) and of is_terminal.
FLAGS = {
    1: ([(0, 1), (1, 1), (1, 5), (2, 1), (2, 7)], [(1, 4), (2, 6), (3, 8)], [(1, 4), (3, 8)]),
    2: ([(0, 4), (1, 1), (1, 8), (2, 1)], [(0, 3), (1, 7)], [(0, 3)]),
}


def batch(v: int, index: int, obs: dict, classes: int, deter: int, stoch: int,
          latent_classes: int) -> dict:
    """Batch `index` (1, 2) of stream v: {key: (B, T + 1, ...)} in HEAD's spaces order."""
    rng = np.random.default_rng([1000 + DRAW, v, index])
    out = {}
    for key, shape in obs.items():
        if key == "image":
            out[key] = rng.integers(0, 256, (B, T + 1, *shape), dtype=np.uint8)
        else:
            out[key] = (2 * rng.normal(size=(B, T + 1, *shape))).astype(np.float32)
    flags = {}
    for name, cells in zip(("is_first", "is_last", "is_terminal"), FLAGS[index], strict=True):
        flags[name] = np.zeros((B, T + 1), bool)
        for b, t in cells:
            flags[name][b, t] = True
    reward = rng.uniform(-1, 2, (B, T + 1)).astype(np.float32)
    out["reward"] = np.where(flags["is_first"], np.float32(0), reward)
    out.update(flags)
    if classes is None:
        out["action"] = rng.uniform(-1, 1, (B, T + 1, 2)).astype(np.float32)
    else:
        out["action"] = rng.integers(0, classes, (B, T + 1)).astype(np.int32)
    out["consec"] = np.zeros((B, T + 1), np.int32)
    out["stepid"] = rng.integers(0, 256, (B, T + 1, 20), dtype=np.uint8)
    out["dyn/deter"] = rng.uniform(-0.9, 0.9, (B, T + 1, deter)).astype(np.float32)
    index = rng.integers(0, latent_classes, (B, T + 1, stoch))
    out["dyn/stoch"] = np.eye(latent_classes, dtype=np.float32)[index]
    return out


# ----------------------------------------------------------------------------- config


def agent_config(ref: Path, shape: str, devices: tuple):
    """HEAD's agent config as `dreamerv3/main.py:make_agent` builds it
    (dreamerv3/main.py:138-149 @e3f0224), from configs.yaml's defaults, the model size and
    the overrides of the set."""
    import elements
    import ruamel.yaml as yaml

    configs = yaml.YAML(typ="safe").load((ref / "dreamerv3" / "configs.yaml").read_text())
    config = elements.Config(configs["defaults"])
    config = config.update(configs["size1m"] if SHAPES[shape] is None else SHAPES[shape])
    config = config.update({
        "seed": DRAW, "batch_size": B, "batch_length": T, "report_length": T,
        "logdir": "/dev/null", "jax.platform": "cpu", "jax.compute_dtype": "float32",
        "jax.prealloc": False, "agent.opt.warmup": 0,
        "jax.train_devices": list(devices), "jax.mock_devices": len(devices) if len(
            devices) > 1 else 0})
    # Two keys embodied.jax.Agent reads that configs.yaml lacks; no numeric effect.
    jaxcfg = dict(config.jax, precompile=False, transfer_guard=False)
    return elements.Config(
        **config.agent, logdir=config.logdir, seed=config.seed, jax=jaxcfg,
        batch_size=config.batch_size, batch_length=config.batch_length,
        replay_context=config.replay_context, report_length=config.report_length,
        replica=config.replica, replicas=config.replicas)


def spaces(family: str):
    import elements

    _, obs, classes = FAMILIES[family]
    obs_space = {}
    for key, shape in obs.items():
        obs_space[key] = elements.Space(np.uint8 if key == "image" else np.float32, shape)
    obs_space.update(reward=elements.Space(np.float32), is_first=elements.Space(bool),
                     is_last=elements.Space(bool), is_terminal=elements.Space(bool))
    if classes is None:
        return obs_space, {"action": elements.Space(np.float32, (2,), -1, 1)}
    return obs_space, {"action": elements.Space(np.int32, (), 0, classes)}


# ----------------------------------------------------------------------------- patches


def patch_sampling(outs, noise: float = 0.0) -> None:
    """Patches 1-3 of the set: every sample is the distribution's mode; a Normal's is
    mean + noise * stddev (noise 0: the mode)."""
    import jax.numpy as jnp

    def onehot_sample(self, seed, shape=()):
        index = self.dist.pred()
        return self._onehot_with_grad(jnp.broadcast_to(index, tuple(shape) + index.shape))

    def categorical_sample(self, seed, shape=()):
        index = jnp.argmax(self.logits, -1).astype(jnp.int32)
        return jnp.broadcast_to(index, tuple(shape) + index.shape)

    def normal_sample(self, seed, shape=()):
        return jnp.full(tuple(shape) + self.mean.shape, noise, jnp.float32) * self.stddev + (
            self.mean)

    outs.OneHot.sample = onehot_sample
    outs.Categorical.sample = categorical_sample
    outs.Normal.sample = normal_sample


RANDOM = ("categorical", "normal", "uniform", "bernoulli", "truncated_normal", "gumbel",
          "permutation", "choice")


@contextlib.contextmanager
def no_random_draws():
    """While active, any jax.random draw raises: the traced train step draws nothing."""
    import jax

    saved = {name: getattr(jax.random, name) for name in RANDOM}

    def refuse(name):
        def draw(*args, **kwargs):
            raise RuntimeError(f"jax.random.{name} called inside the train step")
        return draw

    for name in RANDOM:
        setattr(jax.random, name, refuse(name))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(jax.random, name, fn)


# ----------------------------------------------------------------------------- start state


MODULES = ("enc/", "dyn/", "dec/", "rew/", "con/", "pol/", "val/")
TWOHOT_BIASES = ("rew/head/logits/bias", "val/head/logits/bias", "slowval/head/logits/bias")


def perturb(init: dict) -> dict:
    """The `_pert` start state of the README's *Start states* from HEAD's init."""
    state = {k: np.array(v) for k, v in init.items()}
    rng = np.random.default_rng([2000 + DRAW, 1])
    for key in sorted(state):
        if key.startswith(MODULES):
            x = state[key]
            state[key] = (x + 0.02 * rng.normal(size=x.shape)).astype(x.dtype)
    rng = np.random.default_rng([2000 + DRAW, 2])
    for key in sorted(state):
        if key.startswith("slowval/"):
            x = state["val/" + key[len("slowval/"):]]
            state[key] = (x + 0.01 * rng.normal(size=x.shape)).astype(x.dtype)
    for key in TWOHOT_BIASES:
        j = np.arange(state[key].shape[0])
        state[key] = np.maximum(-0.5 * np.abs(j - 127), -27).astype(np.float32)
    state["retnorm/lo/value"] = np.array(-1, np.float32)
    state["retnorm/hi/value"] = np.array(3, np.float32)
    return state


# ----------------------------------------------------------------------------- loss


class Capture:
    """Read-only wrappers (the set's instrumentation): each calls HEAD's own function
    first and, while `on`, records intermediates recomputed with HEAD's own objects."""

    def __init__(self):
        self.on, self.arrays = False, {}

    def install(self, agent_mod, rssm_mod) -> None:
        import jax
        import jax.numpy as jnp

        cap, sg = self, jax.lax.stop_gradient
        imag_loss, repl_loss = agent_mod.imag_loss, agent_mod.repl_loss
        imagine, decode = rssm_mod.RSSM.imagine, rssm_mod.Decoder.__call__

        def imag_wrapped(act, rew, con, policy, value, slowvalue, retnorm, valnorm, advnorm,
                         update, contdisc=True, horizon=333, **kw):
            voffset, vscale = valnorm.stats()
            losses, outs, mets = imag_loss(act, rew, con, policy, value, slowvalue, retnorm,
                                           valnorm, advnorm, update, contdisc=contdisc,
                                           horizon=horizon, **kw)
            if cap.on:
                val = value.pred() * vscale + voffset
                slowval = slowvalue.pred() * vscale + voffset
                tarval = slowval if kw.get("slowtar", True) else val
                disc = 1 if contdisc else 1 - 1 / horizon
                _, rscale = retnorm.stats()
                ret = outs["ret"]
                pol = policy["action"]
                inner = getattr(pol, "output", pol)
                cap.arrays.update({
                    "diag/imag/act/action": act["action"], "diag/imag/rew": rew,
                    "diag/imag/con": con, "diag/imag/val": val, "diag/imag/slowval": slowval,
                    "diag/imag/weight": jnp.cumprod(disc * con, 1) / disc,
                    "diag/imag/ret": ret, "diag/imag/adv": (ret - tarval[:, :-1]) / rscale,
                    "diag/imag/logpi": pol.logp(sg(act["action"]))[:, :-1],
                    "diag/imag/ent/action": pol.entropy()[:, :-1]})
                if hasattr(inner, "stddev"):  # continuous: the policy's mean and stddev
                    cap.arrays["diag/head/pol1/action/mean"] = inner.mean
                    cap.arrays["diag/head/pol1/action/stddev"] = inner.stddev
            return losses, outs, mets

        def repl_wrapped(last, term, rew, boot, *args, **kw):
            losses, outs, mets = repl_loss(last, term, rew, boot, *args, **kw)
            if cap.on:
                cap.arrays.update({"diag/repl/boot": boot, "diag/repl/ret": outs["ret"]})
            return losses, outs, mets

        def imagine_wrapped(self, carry, policy, length, training, single=False):
            out = imagine(self, carry, policy, length, training, single)
            if cap.on and not single and "diag/imagine/feat/deter" not in cap.arrays:
                cap.arrays.update({f"diag/imagine/feat/{k}": x for k, x in out[1].items()})
            return out

        def decode_wrapped(self, carry, feat, reset, training, single=False):
            out = decode(self, carry, feat, reset, training, single)
            if cap.on:
                cap.arrays.update({f"diag/dec/{k}/pred": r.pred() for k, r in out[2].items()
                                   if k != "image"})  # the image's is left out (1.5 MB)
            return out

        agent_mod.imag_loss, agent_mod.repl_loss = imag_wrapped, repl_wrapped
        rssm_mod.RSSM.imagine, rssm_mod.Decoder.__call__ = imagine_wrapped, decode_wrapped


def run_loss(ref: Path, family: str, shape: str) -> dict:
    """The loss file (the committed subset's arrays) of one jitted Agent.loss on batch 1:
    `jax.jit(nj.pure(f))(state, carry, data, seed)` with f = `_apply_replay_context` then
    `Agent.loss(..., training=True)`, the prologue of Agent.train without the optimizer."""
    sys.path.insert(0, str(ref))
    import embodied
    import jax
    import ninjax as nj
    from dreamerv3 import agent as agent_mod
    from dreamerv3 import rssm as rssm_mod

    patch_sampling(embodied.jax.outs, NOISE.get(family, 0.0))
    cap = Capture()
    cap.install(agent_mod, rssm_mod)
    cfg = agent_config(ref, shape, (0,))
    obs_space, act_space = spaces(family)
    outer = agent_mod.Agent(obs_space, act_space, cfg)
    model = outer.model
    start = perturb({k: np.asarray(v) for k, v in outer.params.items()})
    rssm = cfg.dyn.rssm
    v, obs, classes = FAMILIES[family]
    data = batch(v, 1, obs, classes, rssm.deter, rssm.stoch, rssm.classes)
    carry = outer.init_train(B)
    seed = np.asarray(outer._seeds(0, outer.train_mirrored))

    def f(carry, data):
        cap.arrays = {}
        carry, obs, prevact, _ = model._apply_replay_context(carry, data)
        total, (carry_out, entries, outs, mets) = model.loss(carry, obs, prevact, True)
        return dict(ctx=carry, total=total, carry_out=carry_out, entries=entries, outs=outs,
                    mets=mets, diag=dict(cap.arrays))

    results = []
    for on in (False, True):  # the clean call, then the instrumented one
        cap.on = on
        with no_random_draws():
            after, out = jax.jit(nj.pure(f))(dict(start), carry, data, seed=seed)
        results.append(jax.tree.map(np.asarray, (after, out)))
    (after, out), (_, inst) = results
    check_modes(inst["diag"], discrete=classes is not None)
    arrays = {f"data/{k}": x for k, x in data.items()}
    arrays.update({f"ctx/carry/dyn/{k}": x for k, x in sorted(out["ctx"][1].items())})
    arrays["loss/total"] = out["total"]
    arrays.update({f"loss/{k}": x for k, x in sorted(out["outs"]["losses"].items())})
    arrays.update({f"met/{k}": x for k, x in sorted(out["mets"].items())})
    arrays["outs/tokens"] = out["outs"]["tokens"]
    arrays.update({f"outs/repfeat/{k}": x for k, x in sorted(out["outs"]["repfeat"].items())})
    arrays.update({f"carry_out/dyn/{k}": x for k, x in sorted(out["carry_out"][1].items())})
    arrays.update({f"entries/dyn/{k}": x for k, x in sorted(out["entries"][1].items())})
    for k in ("lo", "hi"):
        arrays[f"state_after/retnorm/{k}/value"] = after[f"retnorm/{k}/value"]
    arrays.update(sorted(inst["diag"].items()))
    return dict(config=agent_config(ref, shape, (0,)), start=start, loss=arrays)


def check_modes(diag: dict, discrete: bool) -> None:
    """Every imagined latent is the one-hot argmax of its logits (the mode patch)."""
    logit, stoch = diag["diag/imagine/feat/logit"], diag["diag/imagine/feat/stoch"]
    mode = np.eye(logit.shape[-1], dtype=stoch.dtype)[logit.argmax(-1)]
    if not np.array_equal(mode, stoch):
        raise RuntimeError("an imagined latent is not the mode of its logits")


# ----------------------------------------------------------------------------- update


def flat(tree, prefix: str) -> dict:
    """{prefix + 'a/b': leaf} of nested dicts (HEAD's own flat names)."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}/"))
        else:
            out[prefix + key] = value
    return out


def replicated_alike(x) -> bool:
    """Every device's buffer of a replicated array holds the same bytes."""
    shards = [np.asarray(s.data) for s in x.addressable_shards]
    return all(s.tobytes() == shards[0].tobytes() for s in shards[1:])


def run(ref: Path, family: str, shape: str, devices: int) -> dict:
    sys.path.insert(0, str(ref))
    import embodied
    import jax
    from dreamerv3 import agent as agent_mod

    patch_sampling(embodied.jax.outs)
    cfg = agent_config(ref, shape, tuple(range(devices)))
    obs_space, act_space = spaces(family)
    outer = agent_mod.Agent(obs_space, act_space, cfg)
    assert len(outer.train_devices) == devices, outer.train_devices
    init = {k: np.asarray(v) for k, v in outer.params.items()}
    start = perturb(init)
    outer.params = {k: jax.device_put(start[k], outer.train_params_sharding[k])
                    for k in outer.params}

    rssm = cfg.dyn.rssm
    v = FAMILIES[family][0]
    batches = [batch(v, i, FAMILIES[family][1], FAMILIES[family][2], rssm.deter, rssm.stoch,
                     rssm.classes) for i in (1, 2)]
    arrays = {}
    for i, data in enumerate(batches, 1):
        arrays.update({f"b{i}/data/{k}": x for k, x in data.items()})
    seeds = [outer._seeds(n, outer.train_mirrored) for n in (0, 1)]
    arrays["seed_u1"], arrays["seed_u2"] = (np.asarray(s) for s in seeds)
    carry = outer.init_train(B)
    arrays.update({k: np.asarray(x) for k, x in flat(carry_dict(carry), "carry_u0/").items()})

    params = outer.params
    uneven = []
    with no_random_draws():
        for i, (data, seed) in enumerate(zip(batches, seeds, strict=True), 1):
            data = {k: jax.device_put(x, outer.train_sharded) for k, x in data.items()}
            allo = {k: x for k, x in params.items() if k in outer.policy_keys}
            dona = {k: x for k, x in params.items() if k not in outer.policy_keys}
            params, carry, outs, mets = outer._train(dona, allo, seed, carry, data)
            got = {f"u{i}/met/{k}": x for k, x in sorted(mets.items())}
            got.update({f"u{i}/state/{k}": x for k, x in sorted(params.items())})
            got.update({f"u{i}/outs/replay/{k}": x
                        for k, x in sorted(flat(outs["replay"], "").items())})
            got.update({f"u{i}/carry/{k}": x for k, x in flat(carry_dict(carry), "").items()})
            uneven += [k for k, x in got.items() if x.is_fully_replicated and devices > 1
                       and not replicated_alike(x)]
            arrays.update({k: np.asarray(x) for k, x in got.items()})
    if uneven:
        raise RuntimeError(f"device buffers differ: {uneven[:5]}")
    return dict(config=agent_config(ref, shape, (0,)), start=start, update=arrays)


def carry_dict(carry) -> dict:
    """HEAD's train carry (enc, dyn, dec, prevact) by name; enc and dec carry nothing."""
    enc, dyn, dec, prevact = carry
    assert not enc and not dec, (enc, dec)
    return {"dyn": dict(dyn), "prevact": dict(prevact)}


def names(family: str, shape: str, devices: int) -> dict:
    """The file of each part: the family's config, its start state (shared by `_eps`),
    its loss and its update (`_dpN` when run on N devices)."""
    tag = ("_small" if shape == "small" else "") + "_" + family
    dp = f"_dp{devices}" if devices > 1 else ""
    return {"config": f"head_config{tag}_s{DRAW}.yaml",
            "start": f"head_params_start{tag.removesuffix('_eps')}_s{DRAW}.npz",
            "loss": f"head_loss{tag}_s{DRAW}.npz", "update": f"head_update{tag}{dp}_s{DRAW}.npz"}


def write(result: dict, files: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for part, name in files.items():
        if part == "config":
            result["config"].save(str(out / name))
        elif part in result:
            np.savez_compressed(out / name, **result[part])


def same(arrays: dict, path: Path) -> bool:
    """`arrays` equal the file's: the same keys in the same order, dtypes, shapes, bytes."""
    with np.load(path, allow_pickle=False) as ref:
        if list(arrays) != list(ref.files):
            return False
        return all(arrays[k].dtype == ref[k].dtype and arrays[k].shape == ref[k].shape
                   and arrays[k].tobytes() == ref[k].tobytes() for k in ref.files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ref", type=Path, help="danijar/dreamerv3 at e3f0224")
    parser.add_argument("out", type=Path)
    parser.add_argument("--family", choices=sorted(FAMILIES), required=True)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="small")
    parser.add_argument("--part", choices=("update", "loss"), default="update",
                        help="update: two train steps on --devices devices; loss: one loss "
                             "call on one device")
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--check", type=Path, default=None,
                        help="compare with this directory's files instead of writing")
    args = parser.parse_args()
    # Before JAX starts its backend (HEAD's jax.mock_devices sets the same flag).
    if args.devices > 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_"
                                   f"platform_device_count={args.devices}").strip()
    if args.part == "update":
        if FAMILIES[args.family][2] is None:
            parser.error("--part update: only the discrete families (pert, image_pert)")
        result = run(args.ref, args.family, args.shape, args.devices)
    else:
        args.devices = 1
        result = run_loss(args.ref, args.family, args.shape)
    files = names(args.family, args.shape, args.devices)
    if args.check is None:
        write(result, files, args.out)
        return
    for part, name in files.items():
        if part in result and part != "config" and (args.check / name).exists():
            print(name, "bit-identical" if same(result[part], args.check / name) else "DIFFERS")


if __name__ == "__main__":
    main()
