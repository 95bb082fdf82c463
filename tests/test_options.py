"""Options: the rvv group in --help, pyproject/ini/CLI/env precedence, and one-line errors."""

import pytest

from pytest_rvv.config.settings import DECLARED, Settings, environment

COLLECT = ("--collect-only", "-q", "correctness/test_compile.py")


def test_help_lists_every_option_in_the_rvv_group(project):
    result = project.run("--help")
    result.stdout.fnmatch_lines(["pytest-rvv: IREE on RISC-V regression testing:"])
    for flag in ("--rvv-targets", "--rvv-models", "--rvv-runtime-riscv64", "--rvv-cache-dir", "--rvv-timeout"):
        assert flag in result.stdout.str()
    assert "PYTEST_RVV_RUNTIME_RISCV64" in result.stdout.str()


def test_collection_ids_are_model_then_target(project):
    project.write()
    result = project.run(*COLLECT, "--rvv-models=mlp", "--rvv-targets=rv64gc,host")
    result.stdout.fnmatch_lines([
        "correctness/test_compile.py::test_compiles[mlp-rv64gc]",
        "correctness/test_compile.py::test_compiles[mlp-host]",
    ])
    assert result.ret == 0


def test_default_targets_are_all_builtins(project):
    project.write()
    result = project.run(*COLLECT, "--rvv-models=mlp")
    for target in ("rv64gc", "rv64gcv-zvl128b", "rv64gcv-zvl256b", "rv64gcv-zvl512b", "aarch64", "host"):
        result.stdout.fnmatch_lines([f"*test_compiles[[]mlp-{target}[]]"])


def test_tool_pytest_rvv_table_sets_defaults(project):
    project.write(extra='[tool.pytest_rvv]\ndefault-targets = ["rv64gcv-zvl256b"]\ndefault-models = ["mlp"]\n')
    result = project.run(*COLLECT)
    result.stdout.fnmatch_lines(["*test_compiles[[]mlp-rv64gcv-zvl256b[]]", "1 test collected*"])


def test_ini_options_override_the_table_and_cli_overrides_both(project):
    project.write(extra='[tool.pytest.ini_options]\nrvv_targets = "rv64gc"\n'
                        '[tool.pytest_rvv]\ndefault-targets = ["host"]\n')
    project.run(*COLLECT, "--rvv-models=mlp").stdout.fnmatch_lines(["*[[]mlp-rv64gc[]]", "1 test collected*"])
    project.run(*COLLECT, "--rvv-models=mlp", "--rvv-targets=aarch64").stdout.fnmatch_lines(
        ["*[[]mlp-aarch64[]]", "1 test collected*"])


def test_user_defined_target_is_selectable(project):
    project.write(extra='[tool.pytest_rvv.targets.rv64gcv-zvl1024b]\nextends = "rv64gcv-zvl512b"\n'
                        'features = ["+m", "+a", "+f", "+d", "+c", "+v", "+zvl1024b"]\n')
    project.run(*COLLECT, "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl1024b").stdout.fnmatch_lines(
        ["*[[]mlp-rv64gcv-zvl1024b[]]"])


@pytest.mark.parametrize(("args", "extra", "message"), [
    (("--rvv-targets=rv64gcx",), "", "ERROR: --rvv-targets: unknown target(s) rv64gcx; known: rv64gc, *"),
    (("--rvv-models=resnet",), "", "ERROR: --rvv-models: unknown model(s) resnet; known: *"),
    (("--rvv-timeout=soon",), "", "ERROR: --rvv-timeout: 'soon' is not a positive number of seconds"),
    ((), '[tool.pytest_rvv.targets.narrow]\nextends = "rv64gcv-zvl512b"\nemulator-cpu = "rv64,v=true,vlen=128"\n',
     "ERROR: target 'narrow': QEMU vlen=128 is smaller than the compiled +zvl512b; it would run with silently*"),
    ((), '[tool.pytest_rvv.models.bad]\npath = "x.onnx"\ninputs = [{ name = "x", shape = [1, -3] }]\n',
     "ERROR: [[]tool.pytest_rvv.models.bad[]] inputs[[]0[]].shape: must be a list of positive integers"),
    (("--rvv-wall-time=x280",), "", "ERROR: --rvv-wall-time: core 'sifive-x280' has no published cache parameters*"),
    (("--rvv-wall-time=x60:9",), "", "ERROR: --rvv-wall-time: 9 threads is not a thread count spacemit-x60's part "
                                     "runs; give 1 to 8 (it ships with 8 harts)"),
    ((), '[tool.pytest_rvv]\ntimeuot = 3\n',
     "ERROR: *pyproject.toml: unknown key(s) in [[]tool.pytest_rvv[]]: timeuot*"),
])
def test_bad_configuration_is_one_clear_line(project, args, extra, message):
    project.write(extra=extra)
    result = project.run(*COLLECT, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_runtime_path_comes_from_the_environment_variable(project, monkeypatch, tmp_path):
    project.write()
    (tmp_path / "iree-run-module").write_bytes(b"")  # only collected here, never run
    monkeypatch.setenv("PYTEST_RVV_RUNTIME_RISCV64", str(tmp_path / "iree-run-module"))
    result = project.run("--collect-only", "correctness/test_compile.py", "--rvv-models=mlp")
    result.stdout.fnmatch_lines([f"rvv: riscv64 runtime {tmp_path / 'iree-run-module'}, user-supplied *"])


def test_the_environment_only_variables_reach_the_settings(monkeypatch, tmp_path):
    """PYTEST_RVV_IREE_SRC and PYTEST_RVV_TOOLS_DIR are read once, into the settings a session is handed."""
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", str(tmp_path / "iree"))
    monkeypatch.setenv("PYTEST_RVV_TOOLS_DIR", str(tmp_path / "tools"))
    settings = Settings.resolve(lambda option: None, {}, tmp_path)
    assert (settings.iree_source, settings.tools_dir) == (str(tmp_path / "iree"), tmp_path / "tools")
    monkeypatch.delenv("PYTEST_RVV_TOOLS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", "")  # empty is unset
    settings = Settings.resolve(lambda option: None, {}, tmp_path)
    assert (settings.iree_source, settings.tools_dir) == (None, tmp_path / "cache" / "pytest-rvv" / "tools")


def test_only_a_declared_variable_is_read():
    with pytest.raises(KeyError, match=r"PYTEST_RVV_UNDECLARED is not declared in config/settings\.py"):
        environment("PYTEST_RVV_UNDECLARED")
    assert "PYTEST_RVV_RUNTIME_RISCV64" in DECLARED and "PYTEST_RVV_IREE_SRC" in DECLARED


def test_a_plain_list_in_the_table_selects_too(project):
    project.write(extra='[tool.pytest_rvv]\ntargets = ["rv64gc", "host"]\n')
    result = project.run(*COLLECT, "--rvv-models=mlp")
    result.stdout.fnmatch_lines(["*[[]mlp-rv64gc[]]", "*[[]mlp-host[]]", "2 tests collected*"])
