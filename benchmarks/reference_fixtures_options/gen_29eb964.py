"""Fixtures of 29eb964's training options, made by its own code, imported unmodified.

Run with the reference's environment (jax 0.4.26, optax 0.2.2), the reference checkout
given as the first argument, the output folder as the second:

    python gen_29eb964.py REF29_CHECKOUT OUT_DIR

Writes options_optimizer_29eb964.npz (jaxutils.Optimizer with weight decay, global
clipping, linear / cosine schedules, separate learning rates) and
options_norms_29eb964.npz (jaxutils.Moments for every impl). README.md of the fixture
folder describes the arrays.
"""

import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
OUT = sys.argv[2]

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from dreamerv3 import jaxutils  # noqa: E402
from dreamerv3 import ninjax as nj  # noqa: E402

MODULES = ("enc", "dyn", "dec", "rew", "con", "actor", "critic")
SHAPES = {"kernel": (3, 4), "bias": (4,), "norm/scale": (4,)}
LRS = {"dec": 1e-3, "enc": 2e-3, "dyn": 5e-4, "rew": 3e-3, "con": 1.5e-3, "actor": 4e-4,
       "critic": 7e-4}


class Leaf(nj.Module):

  def __init__(self, init):
    self.init = init

  def params(self):
    return {k: self.get(k, jnp.asarray, self.init[k]) for k in SHAPES}


class Net(nj.Module):

  def __init__(self, init, lr, **kw):
    self.leaves = [Leaf(init[m], name=m) for m in MODULES]
    self.opt = jaxutils.Optimizer(lr, **kw, name='opt')

  def loss(self, grads):
    total = 0.0
    for leaf in self.leaves:
      for k, v in leaf.params().items():
        total = total + jnp.sum(v * grads[f'{leaf.name}/{k}'])
    return total

  def train(self, grads):
    return self.opt(self.leaves, self.loss, grads)


def flat_name(m, k):
  return f'agent/{m}/{k}'


def run_optimizer(tag, init, grads, steps, lr, **kw):
  out = {}

  def train(grads):
    return Net(init, lr, **kw, name='agent').train(grads)

  state = nj.init(train)({}, grads[0])
  step = jax.jit(nj.pure(train))
  for m in MODULES:
    for k in SHAPES:
      out[f'{tag}/init/{m}/{k}'] = np.asarray(state[flat_name(m, k)])
  hist = {f'{m}/{k}': [] for m in MODULES for k in SHAPES}
  mets = {k: [] for k in ('grad_norm', 'update_norm', 'param_norm', 'grad_steps', 'loss')}
  for s in range(steps):
    state, met = step(state, grads[s])
    for name in hist:
      hist[name].append(np.asarray(state['agent/' + name]))
    for k in mets:
      mets[k].append(np.asarray(met[f'opt_{k}']))
  for name, v in hist.items():
    out[f'{tag}/params/{name}'] = np.stack(v)
  for k, v in mets.items():
    out[f'{tag}/met/{k}'] = np.stack(v)
  return out


def optimizer_fixture():
  rng = np.random.default_rng(63)
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
  base = dict(scaler='rms', eps=1e-20, momentum=True, beta1=0.9, beta2=0.999, agc=0.3,
              pmin=1e-3, warmup=4, anneal=12, wd=0.1, globclip=1.0)
  out.update(run_optimizer('linear', init, grads, steps, 1e-2, schedule='linear', **base))
  lrs = {f'agent/{k}': v for k, v in LRS.items()}
  out.update(run_optimizer('cosine_lrs', init, grads, steps, lrs, schedule='cosine', **base))
  # The learning rate per step: unit gradients, no clipping, no decay, so each update's
  # norm is lr_t times the norm of the bias-corrected momentum of +-1 steps.
  ones = [{k: np.ones_like(v) for k, v in g.items()} for g in grads]
  zero = {m: {k: np.zeros(s, np.float32) for k, s in SHAPES.items()} for m in MODULES}
  unit = dict(scaler='rms', eps=1e-20, momentum=True, beta1=0.9, beta2=0.999, agc=0.0,
              pmin=1e-3, warmup=5, anneal=20, wd=0.0, globclip=0.0)
  for sched in ('linear', 'cosine', 'constant'):
    out.update(run_optimizer(f'lr_{sched}', zero, ones * 2, 26, 1e-3, schedule=sched,
                             **unit))
  out['lrs'] = np.array([LRS[m] for m in MODULES], np.float32)
  out['modules'] = np.array(MODULES)
  np.savez_compressed(f'{OUT}/options_optimizer_29eb964.npz', **out)


def norms_fixture():
  rng = np.random.default_rng(64)
  rounds = 20
  batches = np.stack([
      (rng.normal(3 * np.sin(r), 1 + r, (48, 15))
       + (r % 5 == 0) * rng.standard_cauchy((48, 15))).astype(np.float32)
      for r in range(rounds)])
  out = {'batches': batches}
  for impl in ('off', 'mean_std', 'min_max', 'perc', 'perc_corr'):
    for rate, limit in ((0.01, 1e-8), (0.2, 1.0)):
      tag = f'{impl}/rate{rate}_limit{limit}'

      def call(x, impl=impl, rate=rate, limit=limit):
        norm = jaxutils.Moments(impl, rate=rate, limit=limit, name='norm')
        return norm(x)

      def stats(impl=impl, rate=rate, limit=limit):
        return jaxutils.Moments(impl, rate=rate, limit=limit, name='norm').stats()

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
  np.savez_compressed(f'{OUT}/options_norms_29eb964.npz', **out)


if __name__ == '__main__':
  optimizer_fixture()
  norms_fixture()
  print('ok', jax.__version__)
