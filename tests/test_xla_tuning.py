from dreamerjax.run import xla_tuning as xt


def test_added_for_checked_jaxlib():
    assert xt.tuning_flags("0.10.2", {}) == xt.YNN_OPTION
    flags = xt.tuning_flags("0.10.2", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert flags == "--xla_force_host_platform_device_count=2 " + xt.YNN_OPTION


def test_left_alone_when_unknown_version_opted_out_or_already_set():
    assert xt.tuning_flags("0.4.30", {}) is None  # XLA would abort on an unknown option
    assert xt.tuning_flags(None, {}) is None
    user = {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=-dot"}
    assert xt.tuning_flags("0.10.2", user) is None


def test_the_command_line_opts_out_by_flag_or_variable(monkeypatch):
    from dreamerjax.tools import cli

    monkeypatch.delenv("DREAMERJAX_XLA_TUNING", raising=False)
    args = cli.parse(["train", "--out", "x"])
    assert cli.opted_in(args, "xla_tuning")
    assert not cli.opted_in(cli.parse(["train", "--out", "x", "--no-xla-tuning"]),
                            "xla_tuning")
    monkeypatch.setenv("DREAMERJAX_XLA_TUNING", "0")
    assert not cli.opted_in(args, "xla_tuning")


def test_the_tiers_fusion_option_only_for_the_jaxlib_versions_checked():
    from _xla import FUSION_QUICK, LLVM_QUICK, quick_codegen

    # XLA aborts the process on an option it does not know.
    assert quick_codegen("0.10.2") == f"{LLVM_QUICK} {FUSION_QUICK}"
    assert quick_codegen("0.4.30") == quick_codegen("0.11.0") == quick_codegen(None) == LLVM_QUICK
