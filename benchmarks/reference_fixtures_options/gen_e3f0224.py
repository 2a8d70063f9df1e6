"""Fixtures of e3f0224's training options, made by its own code, imported unmodified.

Run with the reference's environment at e3f0224 (jax 0.4.33, optax 0.2.5, ninjax,
elements), the reference checkout as the first argument, the output folder as the second:

    python gen_e3f0224.py REFHEAD_CHECKOUT OUT_DIR

Writes options_optimizer_e3f0224.npz (the optimiser that Agent._make_opt builds, with
weight decay and linear / cosine schedules) and options_norms_e3f0224.npz
(embodied.jax.Normalize as valnorm / advnorm make it, every impl). README.md of the
fixture folder describes the arrays.
"""

import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
OUT = sys.argv[2]

import embodied  # noqa: E402
import jax  # noqa: E402
import ninjax as nj  # noqa: E402
import optax  # noqa: E402
from dreamerv3.agent import Agent  # noqa: E402

MODULES = ("enc", "dyn", "dec", "rew", "con", "pol", "val")
SHAPES = {"kernel": (3, 4), "bias": (4,), "norm/scale": (4,)}


def run_optimizer(tag, init, grads, steps, **kw):
  # Agent._make_opt reads nothing of the agent: the chain of its defaults and `kw`.
  chain = Agent._make_opt(None, **kw)
  params = {f'agent/{m}/{k}': init[m][k] for m in MODULES for k in SHAPES}
  state = chain.init(params)

  @jax.jit
  def step(params, state, grads):
    updates, state = chain.update(grads, state, params)
    return optax.apply_updates(params, updates), state, optax.global_norm(updates)

  out = {f'{tag}/init/{m}/{k}': init[m][k] for m in MODULES for k in SHAPES}
  hist = {name: [] for name in params}
  norms = []
  for s in range(steps):
    g = {f'agent/{name}': v for name, v in grads[s].items()}
    params, state, unorm = step(params, state, g)
    for name in hist:
      hist[name].append(np.asarray(params[name]))
    norms.append(np.asarray(unorm))
  for name, v in hist.items():
    out[f'{tag}/params/{name[len("agent/"):]}'] = np.stack(v)
  out[f'{tag}/update_norm'] = np.stack(norms)
  return out


def optimizer_fixture():
  rng = np.random.default_rng(65)
  init = {m: {k: rng.normal(0, 0.5, s).astype(np.float32) for k, s in SHAPES.items()}
          for m in MODULES}
  steps = 16
  scales = np.array([1, 0.2, 5, 1, 0.05, 2, 1, 0.5, 3, 1, 0.1, 1, 4, 1, 0.3, 1], np.float32)
  grads = [{f'{m}/{k}': (scales[s] * rng.normal(0, 0.3, sh)).astype(np.float32)
            for m in MODULES for k, sh in SHAPES.items()} for s in range(steps)]
  out = {}
  for s in range(steps):
    for name, g in grads[s].items():
      out.setdefault(f'grads/{name}', []).append(g)
  out = {k: np.stack(v) for k, v in out.items()}
  base = dict(lr=1e-2, agc=0.3, eps=1e-20, beta1=0.9, beta2=0.999, momentum=True,
              wd=0.1, warmup=4, anneal=12)
  out.update(run_optimizer('linear', init, grads, steps, schedule='linear', **base))
  out.update(run_optimizer('cosine', init, grads, steps, schedule='cosine', **base))
  ones = [{k: np.ones_like(v) for k, v in g.items()} for g in grads]
  zero = {m: {k: np.zeros(s, np.float32) for k, s in SHAPES.items()} for m in MODULES}
  unit = dict(lr=1e-3, agc=0.0, eps=1e-20, beta1=0.9, beta2=0.999, momentum=True,
              wd=0.0, warmup=5, anneal=20)
  for sched in ('linear', 'cosine', 'const'):
    out.update(run_optimizer(f'lr_{sched}', zero, ones * 2, 26, schedule=sched, **unit))
  out['modules'] = np.array(MODULES)
  np.savez_compressed(f'{OUT}/options_optimizer_e3f0224.npz', **out)


def norms_fixture():
  rng = np.random.default_rng(64)
  rounds = 20
  batches = np.stack([
      (rng.normal(3 * np.sin(r), 1 + r, (48, 15))
       + (r % 5 == 0) * rng.standard_cauchy((48, 15))).astype(np.float32)
      for r in range(rounds)])
  out = {'batches': batches}
  for impl in ('none', 'meanstd', 'perc'):
    for rate, limit in ((0.01, 1e-8), (0.2, 1.0)):
      tag = f'{impl}/rate{rate}_limit{limit}'

      # As the agent builds valnorm / advnorm: Normalize(**config.valnorm), debias at
      # its default.
      def call(x, impl=impl, rate=rate, limit=limit):
        return embodied.jax.Normalize(impl, rate=rate, limit=limit, name='norm')(x, True)

      def stats(impl=impl, rate=rate, limit=limit):
        return embodied.jax.Normalize(impl, rate=rate, limit=limit, name='norm').stats()

      state = nj.init(call)({}, batches[0])
      _, first = jax.jit(nj.pure(stats))(state)
      offs, scales = [np.float32(first[0])], [np.float32(first[1])]
      step = jax.jit(nj.pure(call))
      for r in range(rounds):
        state, (off, scale) = step(state, batches[r])
        offs.append(np.asarray(off, np.float32))
        scales.append(np.asarray(scale, np.float32))
      out[f'{tag}/offset'] = np.stack(offs)
      out[f'{tag}/scale'] = np.stack(scales)
      for k, v in state.items():
        out[f'{tag}/state/{k.split("/")[1]}'] = np.asarray(v)
  np.savez_compressed(f'{OUT}/options_norms_e3f0224.npz', **out)


if __name__ == '__main__':
  optimizer_fixture()
  norms_fixture()
  print('ok', jax.__version__, optax.__version__)
