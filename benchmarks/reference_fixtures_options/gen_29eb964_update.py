"""Two train steps of 29eb964's agent with training options on, made by its own code.

Run with the reference's environment (jax 0.4.26), the reference checkout, the folder of
the 29eb964 agent fixtures (tests/data/reference: update_centered.npz, ac_config.yaml) and
the output folder:

    python gen_29eb964_update.py REF29_CHECKOUT REFERENCE_FIXTURES OUT_DIR

For each option set below it writes update_<name>.npz in update.npz's layout and the full
flattened config as ac_config_<name>.yaml. The start state, batches and seeds are those
of update_centered.npz, the config ac_config.yaml's with the options set. As for the
agent fixtures (f-h) of that folder, the driver process replaces
jaxutils.OneHotDist.sample by the mode (sg(one_hot(argmax)) + probs - sg(probs)); nothing
else is patched. README.md of the output folder describes the arrays.
"""

import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
FIXTURES, OUT = sys.argv[2], sys.argv[3]

import embodied  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ruamel.yaml as yaml  # noqa: E402
from dreamerv3 import agent as agt  # noqa: E402
from dreamerv3 import jaxutils  # noqa: E402
from dreamerv3 import ninjax as nj  # noqa: E402

sg = jax.lax.stop_gradient

OPTIONS = {
    'options_linear': {
        'opt.wd': 0.05, 'opt.globclip': 3.5, 'opt.warmup': 0, 'opt.anneal': 3,
        'opt.schedule': 'linear', 'separate_lrs': True,
        'valnorm.impl': 'mean_std', 'advnorm.impl': 'mean_std'},
    'options_cosine': {
        'opt.wd': 0.05, 'opt.globclip': 3.5, 'opt.warmup': 0, 'opt.anneal': 3,
        'opt.schedule': 'cosine', 'opt.lr': 1e-4,
        'valnorm.impl': 'perc_corr', 'advnorm.impl': 'min_max'},
}


def mode_sample(self, sample_shape=(), seed=None):
  logits = self.logits_parameter()
  probs = self.probs_parameter()
  onehot = jax.nn.one_hot(jnp.argmax(logits, -1), logits.shape[-1], dtype=probs.dtype)
  sample = sg(onehot) + (probs - sg(probs))
  # Independent passes a sample count n (tfp flattens the sample shape to it).
  shape = tuple(sample_shape) if isinstance(sample_shape, (tuple, list)) else (
      int(sample_shape),)
  return jnp.broadcast_to(sample, (*shape, *sample.shape))


jaxutils.OneHotDist.sample = mode_sample


def flat_yaml(tree, prefix=''):
  out = {}
  for k, v in tree.items():
    if isinstance(v, dict):
      out.update(flat_yaml(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = v
  return out


def optstate_arrays(optstate, params):
  """rms_nu, mom_mu and the counters of the optax chain's state, found by their type
  (jaxutils.scale_by_rms: (step, nu); scale_by_momentum: (step, mu))."""
  out = {}
  names = list(params.keys())
  tuples = [s for s in optstate if isinstance(s, tuple) and len(s) == 2
            and isinstance(s[1], dict) and set(s[1]) == set(names)]
  assert len(tuples) == 2, [type(s) for s in optstate]
  (rc, nu), (mc, mu) = tuples
  out['rms_count'], out['mom_count'] = np.asarray(rc), np.asarray(mc)
  for k in names:
    out[f'rms_nu/{k}'] = np.asarray(nu[k])
    out[f'mom_mu/{k}'] = np.asarray(mu[k])
  return out


def main():
  src = np.load(f'{FIXTURES}/update_centered.npz')
  with open(f'{FIXTURES}/ac_config.yaml') as f:
    base = yaml.YAML(typ='safe').load(f)
  for name, options in OPTIONS.items():
    config = embodied.Config(base).update(options)
    jaxutils.COMPUTE_DTYPE = getattr(jnp, config.jax.compute_dtype)
    jaxutils.PARAM_DTYPE = getattr(jnp, config.jax.param_dtype)
    obs_space = {
        'vector': embodied.Space(np.float32, (4,)),
        'reward': embodied.Space(np.float32),
        'is_first': embodied.Space(bool), 'is_last': embodied.Space(bool),
        'is_terminal': embodied.Space(bool)}
    act_space = {'action': embodied.Space(np.int32, (), 0, 2)}
    inner = agt.Agent.inner(obs_space, act_space, config, name='agent')
    keys = ('vector', 'action', 'reward', 'is_first', 'is_last', 'is_terminal', 'deter',
            'stoch', 'stepid')
    batches = [{k: jnp.asarray(src[f'b{i}_data_{k}']) for k in keys} for i in (1, 2)]
    B = batches[0]['is_first'].shape[0]
    seed = jnp.array([0, 0], jnp.uint32)
    state = nj.init(inner.init_train, static_argnums=[1])({}, B, seed=seed)
    _, carry = jax.jit(nj.pure(inner.init_train), static_argnums=[1])(state, B, seed=seed)
    state = nj.init(inner.train)(state, batches[0], carry, seed=seed)
    start = {k[len('u0/state/'):]: src[k] for k in src.files if k.startswith('u0/state/')}
    assert set(start) <= set(state), sorted(set(start) - set(state))
    train = jax.jit(nj.pure(inner.train))
    out = {k: src[k] for k in src.files
           if k.startswith(('b1_data_', 'b2_data_', 'seed_', 'u0/'))}
    params_keys = [k for k in start if k.startswith('agent/') and '/slowcritic/' not in k
                   and k.split('/')[1] in ('enc', 'dyn', 'dec', 'rew', 'con', 'actor',
                                           'critic')]
    for run in ('', 'ema_'):
      st = {**state, **{k: jnp.asarray(v) for k, v in start.items()}}
      if run:
        st['agent/updater/updates/value'] = jnp.ones((), jnp.int32)
      for k in st:
        if k.startswith(('agent/valnorm/', 'agent/advnorm/')):
          out[f'u0/state/{k}'] = np.asarray(st[k])
      car = carry
      for i, batch in enumerate(batches):
        st, (outs, car, mets) = train(st, batch, car, seed=jnp.asarray(src[f'seed_u{i + 1}']))
        pre = f'{run}u{i + 1}/'
        for k, v in st.items():
          if k == 'agent/opt/state':
            continue
          out[f'{pre}state/{k}'] = np.asarray(v)
        ost = optstate_arrays(st['agent/opt/state'], {k: None for k in params_keys})
        for k, v in ost.items():
          out[f'{pre}state/optstate/{k}'] = v
        for k, v in mets.items():  # the scalars (the */dist copies of tensors are not kept)
          if np.ndim(v) == 0:
            out[f'{pre}met/{k}'] = np.asarray(v)
        for k, v in outs['replay'].items():
          out[f'{pre}replay/{k}'] = np.asarray(v)
        lat, act = car
        out[f'{pre}carry/deter'] = np.asarray(lat['deter'])
        out[f'{pre}carry/stoch'] = np.asarray(lat['stoch'])
        out[f'{pre}carry/action'] = np.asarray(act['action'])
    np.savez_compressed(f'{OUT}/update_{name}.npz', **out)
    flat = flat_yaml(dict(config))
    with open(f'{OUT}/ac_config_{name}.yaml', 'w') as f:
      yaml.YAML(typ='safe').dump(_nested(flat), f)
    print(name, 'opt_grad_norm', [float(out[f'u{i}/met/opt_grad_norm']) for i in (1, 2)])


def _nested(flat):
  out = {}
  for k, v in flat.items():
    *parents, leaf = k.split('.')
    node = out
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = list(v) if isinstance(v, tuple) else v
  return out


if __name__ == '__main__':
  main()
