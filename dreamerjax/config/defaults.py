"""Frozen configuration dataclasses with the reference's defaults (configs.yaml @29eb964).

Static fields fix shapes and lengths (sizes, layer counts, horizons); they are hashed into
the compiled program. Scalar hyperparameters (learning rate, loss scales, rates) live in
their own dataclasses so they are easy to find and to sweep. Nothing here is mutated at run
time: `dataclasses.replace` makes a new config.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from dataclasses import dataclass, field

# The reference versions a run can follow (config key `reference`): danijar/dreamerv3 at
# 29eb964 (the 2024 code the project was built on) and at e3f0224, its HEAD (the 2025
# rewrite that the Nature paper's readers run today). docs/deviations.md lists what differs.
REF_29EB964 = "29eb964"
HEAD_REF = "e3f0224"
REFERENCES = (REF_29EB964, HEAD_REF)


class Reference(enum.StrEnum):
    """The reference versions by name, for the Python API (`make_config(reference=...)`).
    A config holds the plain string (agent.reference), so a member and its string are
    interchangeable wherever a version is given."""

    V29EB964 = REF_29EB964
    E3F0224 = HEAD_REF


@dataclass(frozen=True)
class RSSMConfig:
    """dyn.rssm: block-GRU recurrent state-space model."""

    deter: int = 8192
    hidden: int = 1024
    stoch: int = 32
    classes: int = 64
    blocks: int = 8
    unimix: float = 0.01
    outscale: float = 1.0
    imglayers: int = 2
    obslayers: int = 1
    dynlayers: int = 1
    absolute: bool = False


@dataclass(frozen=True)
class EncoderConfig:
    """enc.simple: MLP for vectors (symlog inputs), CNN for images."""

    units: int = 1024
    layers: int = 3
    symlog: bool = True
    depth: int = 64
    mults: tuple[int, ...] = (1, 2, 3, 4, 4)
    kernel: int = 5
    outer: bool = True
    minres: int = 4


@dataclass(frozen=True)
class DecoderConfig:
    """dec.simple: MLP for vectors (symlog-MSE), transposed CNN for images (MSE)."""

    units: int = 1024
    layers: int = 3
    depth: int = 64
    mults: tuple[int, ...] = (1, 2, 3, 4, 4)
    kernel: int = 5
    outer: bool = True
    minres: int = 4
    outscale: float = 1.0
    block_space: int = 8
    hidden_stoch: bool = True
    vec_outscale: float = 0.1  # nets.Dist default outscale, used by the vector output


@dataclass(frozen=True)
class HeadConfig:
    """An MLP head (rewhead, conhead, actor, critic)."""

    layers: int = 1
    units: int = 1024
    outscale: float = 1.0
    bins: int = 255


@dataclass(frozen=True)
class OptConfig:
    """opt: [global clip] -> AGC -> RMS scaling -> momentum -> [weight decay] -> -lr ->
    warmup and schedule (LaProp).

    wd: decoupled weight decay on the kernels (wd_pattern '/kernel$', jaxutils.py:448-451
    @29eb964; wdregex, agent.py:357-361 @e3f0224). globclip: global-norm clipping before
    AGC (29eb964 only). schedule: the learning rate after the warm-up, annealed until
    step `anneal`; its names are the version's (SCHEDULES).
    """

    lr: float = 4e-5
    eps: float = 1e-20
    beta1: float = 0.9
    beta2: float = 0.999
    agc: float = 0.3
    pmin: float = 1e-3
    warmup: int = 1000
    wd: float = 0.0
    globclip: float = 0.0
    schedule: str = "constant"
    anneal: int = 0


@dataclass(frozen=True)
class LrsConfig:
    """lrs: one learning rate per module when separate_lrs (configs.yaml:101 @29eb964)."""

    dec: float = 1e-4
    enc: float = 1e-4
    dyn: float = 1e-4
    rew: float = 1e-4
    con: float = 1e-4
    actor: float = 3e-5
    critic: float = 3e-5


@dataclass(frozen=True)
class NormConfig:
    """valnorm / advnorm: a moments normaliser of the critic's targets / the advantages
    (jaxutils.Moments @29eb964, embodied/jax/utils.py Normalize @e3f0224); off by default.
    impl names are the version's (NORM_IMPLS)."""

    impl: str = "off"
    rate: float = 0.01
    limit: float = 1e-8


@dataclass(frozen=True)
class RetNormConfig:
    """retnorm: percentile return normaliser (impl perc)."""

    rate: float = 0.01
    limit: float = 1.0
    perclo: float = 5.0
    perchi: float = 95.0


@dataclass(frozen=True)
class LossScales:
    """loss_scales: the decoder's scale is dec_cnn for an image observation and dec_mlp for
    a vector one (configs.yaml:98 @29eb964)."""

    dec_cnn: float = 1.0
    dec_mlp: float = 1.0
    reward: float = 1.0
    cont: float = 1.0
    dyn: float = 1.0
    rep: float = 0.1
    actor: float = 1.0
    critic: float = 1.0
    replay_critic: float = 0.3


@dataclass(frozen=True)
class AgentConfig:
    """Everything the agent's networks and update need."""

    rssm: RSSMConfig = field(default_factory=RSSMConfig)
    enc: EncoderConfig = field(default_factory=EncoderConfig)
    dec: DecoderConfig = field(default_factory=DecoderConfig)
    rewhead: HeadConfig = field(
        default_factory=lambda: HeadConfig(layers=1, outscale=0.0))
    conhead: HeadConfig = field(
        default_factory=lambda: HeadConfig(layers=1, outscale=1.0))
    actor: HeadConfig = field(
        default_factory=lambda: HeadConfig(layers=3, outscale=0.01))
    critic: HeadConfig = field(
        default_factory=lambda: HeadConfig(layers=3, outscale=0.0))
    actor_unimix: float = 0.01
    actor_minstd: float = 0.1
    actor_maxstd: float = 1.0
    opt: OptConfig = field(default_factory=OptConfig)
    retnorm: RetNormConfig = field(default_factory=RetNormConfig)
    valnorm: NormConfig = field(default_factory=NormConfig)
    advnorm: NormConfig = field(default_factory=NormConfig)
    separate_lrs: bool = False
    lrs: LrsConfig = field(default_factory=LrsConfig)
    # reset_context (29eb964, agent.py:185-187): the chance that a replayed sequence's
    # first is_first flag is cleared (the reference's draw keeps it with 1 - p).
    reset_context: float = 0.0
    loss_scales: LossScales = field(default_factory=LossScales)
    free_nats: float = 1.0
    contdisc: bool = True
    horizon: int = 333
    imag_length: int = 15
    return_lambda: float = 0.95
    return_lambda_replay: float = 0.95
    actent: float = 3e-4
    slowreg: float = 1.0
    slow_critic_fraction: float = 0.02
    slow_critic_update: int = 1
    replay_critic_loss: bool = True
    # Summation of the two-hot expectation (rewards, values): "exact" mirror difference
    # (default, D1) or "pairsum", the reference's order with its fused-multiply-add noise.
    twohot_mean: str = "exact"  # one of TWOHOT_MEANS
    # Test-only switch: latent and action samples take the mode (with the
    # straight-through gradient), as the reference fixtures were produced.
    sample_mode: bool = False
    # enc.spaces / dec.spaces: regexes of the observation keys encoded / decoded.
    enc_spaces: str = ".*"
    dec_spaces: str = ".*"
    # jax.compute_dtype: the dtype of activations; parameters, optimiser state, losses and
    # distribution outputs stay float32 (the reference's default is bfloat16,
    # configs.yaml:24; ours float32, docs/config.md).
    compute_dtype: str = "float32"
    # The reference version whose numbers this agent reproduces (REFERENCES).
    reference: str = REF_29EB964

    @property
    def version(self) -> Reference:
        """`reference` as a Reference member: what the algorithm compares to choose a
        version's code (the field stays the plain string that config.json holds)."""
        return Reference(self.reference)


# jax.compute_dtype values that run (numerics.compute_dtype maps them to JAX dtypes).
COMPUTE_DTYPES = ("float32", "bfloat16")
# Values the reference accepts that are refused here, with the reason.
REFUSED_COMPUTE_DTYPES = {
    "float16": "float16 needs the reference's dynamic loss scaling (jaxutils.py:459-463, "
               "546-563), which is not implemented; use bfloat16",
}


@dataclass(frozen=True)
class RunConfig:
    """How a training run is driven (the protocol's section 1 and 4)."""

    env: str = "CartPole-v1"
    num_envs: int = 16
    train_ratio: float = 512.0
    batch_size: int = 16
    batch_length: int = 64  # trained rows; one context row is added (replay_context 1)
    replay_context: int = 1
    train_fill: int = 0  # rows before the first update beyond the replay gate (run.train_fill)
    # replay.size: rows over all envs, as the reference's one FIFO replay; each env's ring
    # holds ceil(min(replay_size, steps) / num_envs) rows (replay_rows_per_env).
    replay_size: int = 5_000_000
    replay_capacity: int = 0  # rows per env when > 0 (overrides replay_size)
    # replay.chunksize (configs.yaml:18 @29eb964, :46 @e3f0224): rows per chunk file of
    # the run's replay files (run/replay_files.py, data/chunks.py).
    replay_chunksize: int = 1024
    steps: int = 20000
    eval_every: int = 2000
    eval_episodes: int = 10
    checkpoint_every: int = 1  # log points between checkpoints
    # run.checkpoint_keep (ours): the newest checkpoints kept; 0 (spelled `all`): every
    # one, a series of the run's agents (the replay is in its files, run/replay_files.py,
    # so a checkpoint is the agent, the optimiser and the counters).
    checkpoint_keep: int = 2
    # run.report_every_logs (ours): log points between open-loop reports (viz/report.py;
    # also the last log point's); 0: never. The default keeps the report a small part of
    # a log interval (results/bench/LOG.md, "What a log point costs on the host").
    report_every: int = 1
    # run.video_every_logs (ours): log points between evaluation videos (run/videos.py):
    # the first episode of each seed's evaluation at that log point, as RUN/videos/ mp4s and
    # to the outputs; 0: never. Off by default on every device: a video replays the
    # evaluation's episodes to the episode limit and encodes each frame on the host
    # (docs/config.md, "Videos at log points").
    video_every: int = 0
    episode_limit: int = 0  # 0 = the environment's own limit
    # run.expl_until (29eb964, embodied/run/train.py:27,104-105): the policy is called in
    # mode 'explore' until this step (always when 0) and 'train' after; the reference's
    # Agent.policy reads no mode (agent.py:129-164), so both act alike and so do ours.
    expl_until: int = 0
    # run.from_checkpoint (configs.yaml:63 @29eb964, :59 @e3f0224): a run directory or one
    # of its checkpoints whose agent a fresh run starts from (run/transfer.py); '' for
    # none. run.from_checkpoint_regex (read by embodied/run/train.py:89 @e3f0224, no key
    # in its configs.yaml): the parameter names loaded, matched from their start; '' all.
    from_checkpoint: str = ""
    from_checkpoint_regex: str = ""
    # run.replay_from (ours): a replay directory of chunk files (the reference's e3f0224 or
    # 29eb964 format, or `dreamerjax replay export`'s seed_<S> folders) that fills a fresh
    # run's replay before its first tick (run/replay_io.py); '' for none. run.offline
    # (ours): no env steps; the train-ratio schedule's updates run on those rows alone (the
    # evaluation still plays the env). Neither changes on resume.
    replay_from: str = ""
    offline: bool = False
    # run.driver_parallel (configs.yaml:73, the reference's default True): host envs
    # (gym_, atari_, dmc_, crafter_) step in one worker process each instead of in this
    # process; no effect on compiled envs or on the results (docs/environments.md).
    driver_parallel: bool = False
    # run.seed_loop (ours): how the seeds of one program share it. "vmap": one batched
    # program (the accelerators' choice); "map": one seed after another inside the same
    # compiled program (lax.map), which on XLA:CPU keeps image models' convolutions off the
    # naive emitter that vmapped (grouped) convolutions fall back to (results/bench/LOG.md).
    # "threads": each seed's chunk is a program of its own (the 1-seed program), the seeds'
    # programs run side by side on host threads (as many as CPU cores), so one seed's
    # serial stretches overlap another's work on a multi-core CPU; compiled envs only (host
    # envs' programs map their seeds). "auto": "threads" on a CPU backend, "vmap" otherwise.
    # One device only for "map" and "threads".
    seed_loop: str = "auto"
    # run.replay_memory (ours; the reference keeps its replay in host memory, Python
    # objects): where the compiled loop keeps each seed's replay ring. "device": in the
    # accelerator's memory with the rest of the state; "host": in host memory (JAX's
    # pinned_host memory kind), only the sampled batch and the written rows crossing to and
    # from the device inside the program (data/replay.py, docs/scaling.md). The same
    # numbers either way.
    replay_memory: str = "device"
    # jax.train_devices (configs.yaml:31 @29eb964): the devices that train one seed's
    # agent data-parallel, numbered within the seed's group of devices (so 0 ... N-1):
    # each takes num_envs / N of the seed's envs and replay and batch_size / N of its
    # batch; gradients are averaged over them (docs/scaling.md). `--data-devices N`.
    # Over several processes: at e3f0224 each process's own devices, as HEAD's
    # (run/plan.py processes_config); at 29eb964 counted over all processes.
    train_devices: tuple[int, ...] = (0,)
    # jax.train_mesh (embodied/jax/agent.py:27 @e3f0224): HEAD's 'd,f,t' shape of the
    # train devices (data, FSDP, tensor; one -1 takes the rest). The batch splits over all
    # d x f devices; f > 1 also stores the parameters and optimiser state sharded over
    # the f devices (algo/fsdp.py; HEAD replicates them, docs/deviations.md D21). 't' must
    # be 1; f must be 1 at 29eb964, which has no such axis.
    train_mesh: str = "-1,1,1"
    # replay.fracs / replay.prio / replay.recexp / replay.priosignal (configs.yaml:14-17
    # @29eb964, :42-45 @e3f0224): the selector mixture the replay samples with after its
    # online queue (data/replay.py Selector); uniform 1.0 is today's uniform replay.
    replay_uniform: float = 1.0
    replay_priority: float = 0.0
    replay_recency: float = 0.0
    replay_prio_exponent: float = 0.8
    replay_prio_maxfrac: float = 0.5
    replay_prio_initial: float = math.inf
    replay_prio_zero_on_sample: bool = True
    replay_recexp: float = 1.0
    replay_priosignal: str = "model"


def data_devices(run: RunConfig) -> int:
    """Devices one seed's agent trains on (len(jax.train_devices))."""
    return len(run.train_devices)


def mesh_shape(run: RunConfig) -> tuple[int, int, int]:
    """jax.train_mesh resolved over the train devices: (d, f, t). ValueError naming the
    key when it does not parse or does not fit."""
    n = data_devices(run)
    try:
        shape = [int(x) for x in run.train_mesh.split(",")]
    except ValueError:
        raise ValueError(f"jax.train_mesh: expects three integers 'd,f,t', got "
                         f"{run.train_mesh!r}") from None
    if len(shape) != 3 or shape.count(-1) > 1 or any(x == 0 or x < -1 for x in shape):
        raise ValueError(f"jax.train_mesh: expects three positive integers 'd,f,t' (one "
                         f"may be -1), got {run.train_mesh!r}")
    known = math.prod(x for x in shape if x != -1)
    if n % known:
        raise ValueError(f"jax.train_mesh: {run.train_mesh!r} does not divide the {n} "
                         "train devices (jax.train_devices)")
    shape = [n // known if x == -1 else x for x in shape]
    if math.prod(shape) != n:
        raise ValueError(f"jax.train_mesh: {run.train_mesh!r} holds {math.prod(shape)} "
                         f"devices, jax.train_devices {n}")
    return tuple(shape)


def fsdp_devices(run: RunConfig) -> int:
    """f of jax.train_mesh: the devices over which one seed's parameters, slow critic and
    optimiser state are stored sharded (algo/fsdp.py); 1 keeps them whole on every
    device."""
    return mesh_shape(run)[1]


# agent.twohot_mean values: the summations algo/numerics.py implements (its dict of them
# is keyed by these names).
TWOHOT_MEANS = ("exact", "pairsum")

# opt.schedule values per version (jaxutils.py:514-523 @29eb964; agent.py:366-375 @e3f0224);
# the first is the default, a constant learning rate.
SCHEDULES = {REF_29EB964: ("constant", "linear", "cosine"), HEAD_REF: ("const", "linear", "cosine")}

# valnorm.impl / advnorm.impl values per version (jaxutils.py:309-327 @29eb964;
# embodied/jax/utils.py:28-44 @e3f0224); the first is the default, off.
NORM_IMPLS = {REF_29EB964: ("off", "mean_std", "min_max", "perc", "perc_corr"),
              HEAD_REF: ("none", "meanstd", "perc")}

# run.seed_loop values (config.RunConfig.seed_loop).
SEED_LOOPS = ("auto", "vmap", "map", "threads")

# run.replay_memory values (config.RunConfig.replay_memory).
REPLAY_MEMORIES = ("device", "host")


@dataclass(frozen=True)
class AtariConfig:
    """env.atari (configs.yaml:79 @29eb964): read by the Atari suite."""

    size: tuple[int, int] = (64, 64)
    repeat: int = 4
    sticky: bool = True
    gray: bool = True
    actions: str = "all"
    lives: str = "unused"
    noops: int = 0
    autostart: bool = False
    pooling: int = 2
    aggregate: str = "max"
    resize: str = "pillow"
    # sticky_literal (ours): whether `sticky` takes effect. False, the reference: it sets
    # repeat_action_probability after loading the ROM (embodied/envs/atari.py:51-59), when
    # ALE has already read its default 0.25, so sticky actions act whatever `sticky` says.
    # True: `sticky` is set before the ROM loads and False really turns them off.
    sticky_literal: bool = False


@dataclass(frozen=True)
class Atari100kConfig:
    """env.atari100k (configs.yaml:81 @29eb964)."""

    size: tuple[int, int] = (64, 64)
    repeat: int = 4
    sticky: bool = False
    gray: bool = False
    actions: str = "all"
    lives: str = "unused"
    noops: int = 0
    autostart: bool = False
    resize: str = "pillow"
    length: int = 100000
    # sticky_literal (ours): as env.atari.sticky_literal. The reference's atari100k runs
    # had sticky actions at 0.25 despite sticky False; True gives the benchmark's
    # definition (no sticky actions).
    sticky_literal: bool = False


@dataclass(frozen=True)
class CrafterConfig:
    """env.crafter (configs.yaml:80 @29eb964), without its logdir options."""

    size: tuple[int, int] = (64, 64)


@dataclass(frozen=True)
class DMCConfig:
    """env.dmc (configs.yaml:84 @29eb964)."""

    size: tuple[int, int] = (64, 64)
    repeat: int = 2
    image: bool = True
    camera: int = -1


@dataclass(frozen=True)
class LocoNavConfig:
    """env.loconav (configs.yaml:86 @29eb964; repeat 1 at e3f0224, configs.yaml:37)."""

    size: tuple[int, int] = (64, 64)
    repeat: int = 2
    camera: int = -1


@dataclass(frozen=True)
class ProcgenConfig:
    """env.procgen (configs.yaml:83 @29eb964, :31 @e3f0224; `resize` is the constructor's
    argument at 29eb964, embodied/envs/procgen.py:8)."""

    size: tuple[int, int] = (64, 64)
    resize: str = "pillow"


@dataclass(frozen=True)
class MemmazeConfig:
    """env.memmaze (ours; envs/host/memmaze.py): the observation keys of the reference's
    Memory Maze, ExtraObs at 29eb964 (True), the image only at e3f0224 (False)."""

    extra_obs: bool = True


@dataclass(frozen=True)
class CraftaxConfig:
    """env.craftax (ours; envs/compiled/craftax.make): the stored image size of the Pixels tasks,
    64 x 64 as the reference's env.crafter.size (configs.yaml:80 @29eb964)."""

    size: tuple[int, int] = (64, 64)


@dataclass(frozen=True)
class PlaygroundConfig:
    """env.playground (ours; envs/compiled/playground.make): the action repeat of the reference's
    env.dmc.repeat (configs.yaml:84 @29eb964) and MJX's implementation ("jax" on CPU,
    "warp" on a GPU). The episode is Playground's 1,000 control steps over the repeat
    unless wrapper.length sets it."""

    repeat: int = 2
    impl: str = "jax"


@dataclass(frozen=True)
class BraxConfig:
    """env.brax (ours; envs/compiled/brax.make): Brax's physics backend and the action repeat
    (1, as Brax trains). The episode is 1,000 agent steps unless wrapper.length sets it."""

    backend: str = "generalized"
    repeat: int = 1


@dataclass(frozen=True)
class EnvConfig:
    """env: per-suite settings, named as the reference's `env.<suite>.<key>`."""

    atari: AtariConfig = field(default_factory=AtariConfig)
    atari100k: Atari100kConfig = field(default_factory=Atari100kConfig)
    crafter: CrafterConfig = field(default_factory=CrafterConfig)
    dmc: DMCConfig = field(default_factory=DMCConfig)
    loconav: LocoNavConfig = field(default_factory=LocoNavConfig)
    procgen: ProcgenConfig = field(default_factory=ProcgenConfig)
    memmaze: MemmazeConfig = field(default_factory=MemmazeConfig)
    craftax: CraftaxConfig = field(default_factory=CraftaxConfig)
    playground: PlaygroundConfig = field(default_factory=PlaygroundConfig)
    brax: BraxConfig = field(default_factory=BraxConfig)


# logger.outputs values (LoggerConfig.outputs): where a run's log points go.
LOGGER_OUTPUTS = ("jsonl", "tensorboard", "wandb", "mlflow")


@dataclass(frozen=True)
class LoggerConfig:
    """logger (configs.yaml:22-27 at e3f0224, the reference's HEAD): where log points go
    and which keys the terminal line shows. records.jsonl is written whatever `outputs`
    says (resume, summary and compare read it); the W&B and MLflow outputs are
    run/outputs.py's, attached to a run as callbacks."""

    outputs: tuple[str, ...] = ("jsonl", "tensorboard")
    # A regex searched in each name the terminal line could show (rows and updates always
    # come first); the default shows the line's five figures.
    filter: str = "eval_return|train_return|wm_loss|actor_entropy|updates/s"
    wandb_project: str = ""  # "" leaves it to W&B (WANDB_PROJECT, else its default)
    wandb_entity: str = ""  # "" leaves it to W&B (WANDB_ENTITY, else the user's)
    mlflow_uri: str = ""  # "" = MLFLOW_TRACKING_URI if set, else run_dir/mlflow.db
    mlflow_experiment: str = "dreamerjax"


# The one default model size of every entry point (Config(), the CLI, `resolve`). The
# reference's defaults are its 200m model; ours are the protocol's 1m (docs/config.md).
DEFAULT_SIZE = "1m"


def _default_agent() -> AgentConfig:
    return agent_config(DEFAULT_SIZE)


@dataclass(frozen=True)
class Config:
    agent: AgentConfig = field(default_factory=_default_agent)
    run: RunConfig = field(default_factory=RunConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    size: str = DEFAULT_SIZE  # a label: the size preset the widths equal, or "custom"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# Model-size presets: configs.yaml:148-176 @29eb964 (depth, units, rssm) plus 1m, the
# protocol's size (d = 64: units = hidden = d, deter = 8d, classes = d/16).
SIZES: dict[str, dict] = {
    "1m": dict(deter=512, hidden=64, classes=4, depth=16, units=64),
    "12m": dict(deter=2048, hidden=256, classes=16, depth=16, units=256),
    "25m": dict(deter=3072, hidden=384, classes=24, depth=24, units=384),
    "50m": dict(deter=4096, hidden=512, classes=32, depth=32, units=512),
    "100m": dict(deter=6144, hidden=768, classes=48, depth=48, units=768),
    "200m": dict(deter=8192, hidden=1024, classes=64, depth=64, units=1024),
    "400m": dict(deter=12288, hidden=1536, classes=96, depth=96, units=1536),
}


# HEAD's size presets (configs.yaml:120-158 @e3f0224): the same widths as 29eb964's from
# 12m on; size1m has CNN depth 4 where our protocol's 1m has 16.
HEAD_SIZES: dict[str, dict] = {**SIZES, "1m": dict(SIZES["1m"], depth=4)}


def head_defaults(base: AgentConfig) -> AgentConfig:
    """`base` with the values HEAD (e3f0224) gives the parts both versions have
    (configs.yaml:100-118 @e3f0224): CNN depth multipliers [2, 3, 4, 4] without an outer
    stage (the encoder max-pools every stage to 64 / 16 = 4 pixels), the vector decoder's
    output scale 1.0 (`dec.simple.outscale`), no policy unimix (`Head.categorical` has
    none, heads.py:101-110)."""
    rep = dataclasses.replace
    cnn = dict(mults=(2, 3, 4, 4), outer=False, minres=4)
    off = NORM_IMPLS[HEAD_REF][0]
    return rep(base, enc=rep(base.enc, **cnn), dec=rep(base.dec, vec_outscale=1.0, **cnn),
               actor_unimix=0.0, reference=HEAD_REF,
               opt=rep(base.opt, schedule=SCHEDULES[HEAD_REF][0]),
               valnorm=rep(base.valnorm, impl=off), advnorm=rep(base.advnorm, impl=off))


def _resized(deter: int, hidden: int, classes: int, units: int, depth: int,
             stoch: int | None = None) -> AgentConfig:
    """The reference defaults with the RSSM, MLP widths and CNN depth replaced."""
    base = AgentConfig()
    rep = dataclasses.replace
    rssm = rep(base.rssm, deter=deter, hidden=hidden, classes=classes)
    if stoch is not None:
        rssm = rep(rssm, stoch=stoch)
    heads = {k: rep(getattr(base, k), units=units)
             for k in ("rewhead", "conhead", "actor", "critic")}
    return rep(base, rssm=rssm, enc=rep(base.enc, units=units, depth=depth),
               dec=rep(base.dec, units=units, depth=depth), **heads)


def agent_config(size: str = DEFAULT_SIZE, reference: str = REF_29EB964,
                 **overrides) -> AgentConfig:
    """The reference's default agent config resized to a preset, of the given reference
    version (REFERENCES).

    `overrides` replace top-level AgentConfig fields after resizing.
    """
    if reference not in REFERENCES:
        raise ValueError(f"Unknown reference {reference!r}; known: {', '.join(REFERENCES)}")
    if size not in SIZES:
        raise ValueError(f"Unknown model size {size!r}; known sizes: {', '.join(SIZES)}")
    if reference == HEAD_REF:
        return dataclasses.replace(head_defaults(_resized(**HEAD_SIZES[size])), **overrides)
    return dataclasses.replace(_resized(**SIZES[size]), **overrides)


# The fixtures' tiny network (ours, for smoke runs and tests): the RSSM and MLP widths of
# the agent fixtures (f-j) and the CNN depth of the image fixture (i). A smoke preset with the
# reference's default depth 64 (size200m's CNN) needed tens of GB for 16 x 65 frames of
# 64 x 64 and minutes per update on a CPU.
TINY: dict = dict(deter=64, hidden=16, classes=4, units=16, depth=4, stoch=4)


def tiny_agent_config(**overrides) -> AgentConfig:
    """The tiny config (TINY): deter 64, hidden 16, classes 4, stoch 4, units 16, CNN depth 4."""
    return dataclasses.replace(_resized(**TINY), **overrides)



def replay_rows_per_env(run: RunConfig) -> int:
    """Rows of each env's replay ring: run.replay_capacity if set, else replay.size over
    the envs, but never more than the run fills (a ring the run never wraps holds the
    same rows as the reference's 5e6 FIFO)."""
    if run.replay_capacity > 0:
        return run.replay_capacity
    return math.ceil(min(run.replay_size, run.steps) / run.num_envs)


def from_dict(d: dict) -> Config:
    """Inverse of Config.to_dict (tuples restored). Fields missing from `d` (a config.json
    written before they existed) take their defaults; loss_scales.dec of such a file sets
    both dec_cnn and dec_mlp."""
    d = json.loads(json.dumps(d))  # a deep copy
    scales = d.get("agent", {}).get("loss_scales", {})
    if "dec" in scales:
        dec = scales.pop("dec")
        scales.setdefault("dec_cnn", dec)
        scales.setdefault("dec_mlp", dec)

    def build(cls, values):
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in values:
                continue
            v = values[f.name]
            typ = f.type if not isinstance(f.type, str) else f.type
            sub = _DATACLASSES.get(str(typ))
            if sub is not None and isinstance(v, dict):
                v = build(sub, v)
            elif isinstance(v, list):
                v = tuple(v)
            elif isinstance(v, str) and typ in (float, "float") and v in ("inf", "-inf"):
                v = float(v)  # an infinite value, as config.json spells it
            kwargs[f.name] = v
        return cls(**kwargs)

    return build(Config, d)


def check_opt_options(cfg: OptConfig, version: str, separate_lrs: bool = False) -> None:
    """ValueError (one line naming the key) for opt settings the reference refuses: an
    unknown schedule, a schedule without an anneal step past the warm-up, a negative
    decay or clip, global clipping or separate_lrs at e3f0224 (which has neither)."""
    head = version == HEAD_REF
    pre = "agent.opt" if head else "opt"
    names = SCHEDULES[version]
    constant = cfg.schedule in (SCHEDULES[REF_29EB964][0], SCHEDULES[HEAD_REF][0])
    if cfg.schedule not in names and not constant:
        raise ValueError(f"{pre}.schedule: {cfg.schedule!r}; choose one of {', '.join(names)}")
    for key in ("wd", "globclip", "anneal"):
        if getattr(cfg, key) < 0:
            raise ValueError(f"{pre}.{key}: must be >= 0, got {getattr(cfg, key)}")
    if not constant:
        # jaxutils.py:516 @29eb964 asserts anneal > warmup; e3f0224 asserts anneal > 0
        # (agent.py:365) and its cosine decay needs anneal - warmup > 0 steps.
        linear_head = head and cfg.schedule == "linear"
        least, what = (0, "0") if linear_head else (cfg.warmup, f"{pre}.warmup")
        if cfg.anneal <= least:
            raise ValueError(f"{pre}.anneal: {cfg.anneal} must exceed {what} for schedule "
                             f"{cfg.schedule!r}")
    if head and cfg.globclip:
        raise ValueError(f"opt.globclip: {version} has no global-norm clipping")
    if head and separate_lrs:
        raise ValueError(f"separate_lrs: {version} has one learning rate for all modules")


def check_agent_options(agent: AgentConfig) -> None:
    """ValueError naming the key for the agent's training options that its version does
    not have: opt (check_opt_options), valnorm / advnorm impls and rates, reset_context."""
    version = agent.reference
    head = version == HEAD_REF
    check_opt_options(agent.opt, version, agent.separate_lrs)
    for name in ("valnorm", "advnorm"):
        cfg = getattr(agent, name)
        key = f"agent.{name}" if head else name
        names = NORM_IMPLS[version]
        # A config written before these keys existed holds 29eb964's 'off'.
        if cfg.impl not in names and cfg.impl != NORM_IMPLS[REF_29EB964][0]:
            raise ValueError(f"{key}.impl: {cfg.impl!r}; choose one of {', '.join(names)}")
        if not 0.0 <= cfg.rate <= 1.0:
            raise ValueError(f"{key}.rate: must be in [0, 1], got {cfg.rate}")
        if cfg.limit < 0:
            raise ValueError(f"{key}.limit: must be >= 0, got {cfg.limit}")
    if not 0.0 <= agent.reset_context <= 1.0:
        raise ValueError(f"reset_context: must be in [0, 1], got {agent.reset_context}")
    if head and agent.reset_context:
        raise ValueError(f"reset_context: {version} has no replay-context reset")


_DATACLASSES = {
    c.__name__: c
    for c in (RSSMConfig, EncoderConfig, DecoderConfig, HeadConfig, OptConfig,
              LrsConfig, NormConfig, RetNormConfig, LossScales, AgentConfig, RunConfig, AtariConfig,
              Atari100kConfig, CrafterConfig, DMCConfig, LocoNavConfig, ProcgenConfig,
              MemmazeConfig, CraftaxConfig,
              PlaygroundConfig, BraxConfig, EnvConfig, LoggerConfig)
}
