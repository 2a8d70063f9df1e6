"""env.craftax / env.playground / env.brax: the compiled suites' config sections reach
their make functions; unknown keys and bad values are refused by name."""

import pytest

from dreamerjax import envs
from dreamerjax.config import dotted as D
from dreamerjax.config import keys as C
from dreamerjax.config import resolve as R
from dreamerjax.config.defaults import Config
from dreamerjax.run import setup as setup_lib


def test_compiled_suites_sections_and_defaults():
    flat = D.to_dotted(Config())
    assert flat["env.craftax.size"] == (64, 64)
    assert flat["env.playground.repeat"] == 2 and flat["env.playground.impl"] == "jax"
    assert flat["env.brax.backend"] == "generalized" and flat["env.brax.repeat"] == 1
    for key in ("env.craftax.size", "env.playground.repeat", "env.brax.backend"):
        assert key in C.OUR_KEYS and key not in C.REFERENCE_KEYS


@pytest.mark.parametrize(("env_id", "sets", "want"), [
    ("craftax_Craftax-Classic-Pixels-v1", ["env.craftax.size=[32,48]"], {"size": (32, 48)}),
    ("playground_CartpoleBalance", ["env.playground.repeat=4"],
     {"repeat": 4, "impl": "jax"}),
    ("brax_ant", ["env.brax.backend=positional", "env.brax.repeat=2"],
     {"backend": "positional", "repeat": 2}),
    ("gymnax_CartPole-v1", ["env.brax.repeat=3"], {}),  # only the run's suite is read
])
def test_set_reaches_the_suites_make(env_id, sets, want, monkeypatch):
    config, prov = R.resolve(sets=sets, tiny=True, env=env_id)
    assert envs.suite_options(config.env, env_id) == want
    seen = {}

    def spy(env_id, episode_limit=0, *, dict_obs=False, **options):
        seen.update(options)
        raise LookupError("stop before building the env")

    monkeypatch.setattr(envs, "make_env", spy)
    with pytest.raises(LookupError):
        setup_lib.make_setup(config)
    assert seen == want
    assert prov.origin[R.parse_set(sets[0])[0]].startswith("--set")


def test_craftax_size_sets_the_stored_image():
    pytest.importorskip("craftax")
    config, _ = R.resolve(sets=["env.craftax.size=[32,48]"], tiny=True,
                          env="craftax_Craftax-Classic-Pixels-v1")
    spec = envs.make_env(config.run.env, 0, dict_obs=True,
                         **envs.suite_options(config.env, config.run.env))
    assert spec.obs_space == (("image", (32, 48, 3), "uint8"),)


@pytest.mark.parametrize(("setting", "words"), [
    ("env.craftax.sizes=[32,32]", "unknown key 'env.craftax.sizes'"),
    ("env.brax.length=100", "unknown key 'env.brax.length'"),
    ("env.playground.repeat=0", "env.playground.repeat: the action repeat"),
    ("env.brax.repeat=0", "env.brax.repeat: the action repeat"),
    ("env.craftax.size=[0,64]", "env.craftax.size: needs two positive sizes"),
    ("env.craftax.size=[64,64,3]", "env.craftax.size"),
    ("env.playground.repeat=two", "env.playground.repeat"),
])
def test_bad_suite_keys_are_refused_by_name(setting, words):
    with pytest.raises(C.ConfigError) as info:
        R.resolve(sets=[setting], tiny=True, env="craftax_Craftax-Classic-Pixels-v1")
    assert words in str(info.value)
