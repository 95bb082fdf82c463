"""Specification: the wheels' iree-compile runs on tcmalloc where setup unpacked it and makes the same bytes as on the
system's malloc; a user's own build runs on its own (base/tools.py ``allocator_env``; docs/ci.md: 7 % less compile
CPU over the default suites)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError
from pytest_rvv.base.process import run_process
from pytest_rvv.base.store import Store
from pytest_rvv.base.tools import TCMALLOC, allocator_env
from pytest_rvv.compile.compiler import Compiler
from pytest_rvv.config.settings import ALLOCATOR_ENV, Settings, allocator, default_tools_dir
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.toolchain.toolchain import find_toolchain
from tests.test_compile_phases import conv_matmul_model

NEEDS_TCMALLOC = pytest.mark.skipif(
    not (default_tools_dir() / TCMALLOC).is_file(),
    reason="no tcmalloc in the tools folder: `bash scripts/setup.sh tcmalloc` puts it there")


@pytest.fixture(autouse=True)
def _default_allocator(monkeypatch):
    monkeypatch.delenv(ALLOCATOR_ENV, raising=False)


def _mapped(env: dict[str, str] | None) -> str:
    """The shared objects a tool started in ``env`` has mapped."""
    return run_process(["cat", "/proc/self/maps"], timeout_s=30, env=env).stdout


@NEEDS_TCMALLOC
def test_a_tool_runs_on_tcmalloc_beside_a_users_own_preload(monkeypatch):
    monkeypatch.setenv("LD_PRELOAD", "libm.so.6")
    env = allocator_env("tcmalloc", default_tools_dir())
    assert env is not None
    assert env["LD_PRELOAD"].split() == ["libm.so.6", str(default_tools_dir() / TCMALLOC)]
    maps = _mapped(env)
    assert "libtcmalloc_minimal.so.4" in maps and "libm.so.6" in maps


def test_system_runs_iree_compile_on_its_own_malloc(monkeypatch):
    assert allocator() == "tcmalloc"
    monkeypatch.setenv(ALLOCATOR_ENV, "System")
    assert allocator() == "system"
    assert allocator_env(allocator(), default_tools_dir()) is None
    assert "tcmalloc" not in _mapped(allocator_env(allocator(), default_tools_dir()))


def test_an_unknown_allocator_is_one_line_naming_the_variable(monkeypatch):
    monkeypatch.setenv(ALLOCATOR_ENV, "jemalloc")
    with pytest.raises(ConfigError, match=r"^PYTEST_RVV_ALLOCATOR=jemalloc: use tcmalloc \(the default\) or system"):
        allocator()


def test_an_unknown_allocator_stops_the_session_at_its_start_not_at_its_first_compile(monkeypatch):
    """A rerun whose compiles are all in the cache would otherwise never read it."""
    monkeypatch.setenv(ALLOCATOR_ENV, "jemalloc")
    with pytest.raises(ConfigError, match=r"^PYTEST_RVV_ALLOCATOR=jemalloc: "):
        Settings.resolve(lambda option: None, {}, Path("."))
    monkeypatch.setenv(ALLOCATOR_ENV, "system")
    assert Settings.resolve(lambda option: None, {}, Path(".")).allocator == "system"


@NEEDS_TCMALLOC
@pytest.mark.parametrize("target", ["rv64gc", "rv64gcv-zvl256b-mmt4d", "host"])
def test_a_module_compiled_on_tcmalloc_is_the_system_mallocs_byte_for_byte(target, tmp_path, monkeypatch):
    model = conv_matmul_model(tmp_path / "convmm.onnx")
    toolchain = find_toolchain()
    modules = {}
    for malloc in ("tcmalloc", "system"):
        monkeypatch.setenv(ALLOCATOR_ENV, malloc)
        compiler = Compiler(toolchain, Store(tmp_path / malloc), targets=[BUILTIN_TARGETS[target]])
        artifact = compiler.compile("convmm", compiler.import_onnx("convmm", model, 17), BUILTIN_TARGETS[target])
        modules[malloc] = [artifact.path.read_bytes(), *(p.read_bytes() for p in artifact.executables)]
    assert modules["tcmalloc"] == modules["system"]


def _compile_environments(tmp_path: Path, monkeypatch, toolchain) -> list[dict[str, str] | None]:
    """The environment of every iree-compile run (probe, shared phases, modules) of three targets' compiles."""
    import pytest_rvv.compile.compiler as compiler_module

    runs: list[tuple[str, dict[str, str] | None]] = []
    real = compiler_module.run_process

    def recording(argv, **kwargs):  # the real iree-compile runs; this only notes what it was given
        runs.append((Path(str(argv[0])).name, kwargs.get("env")))
        return real(argv, **kwargs)

    monkeypatch.setattr(compiler_module, "run_process", recording)
    model = conv_matmul_model(tmp_path / "convmm.onnx")
    targets = [BUILTIN_TARGETS[name] for name in ("rv64gcv-zvl128b", "rv64gcv-zvl256b", "rv64gcv-zvl256b-mmt4d")]
    compiler = Compiler(toolchain, Store(tmp_path / "store"), targets=targets)
    imported = compiler.import_onnx("convmm", model, 17)
    for target in targets:
        compiler.compile("convmm", imported, target)
    compiles = [env for tool, env in runs if tool == "iree-compile"]
    assert len(compiles) >= 1 + len(targets)  # at least a probe and each module
    return compiles


@NEEDS_TCMALLOC
def test_every_iree_compile_run_of_the_wheels_compiler_is_on_tcmalloc(tmp_path: Path, monkeypatch):
    """The probe, the shared phases and the module's own compile (the importer is Python, on its own malloc)."""
    compiles = _compile_environments(tmp_path, monkeypatch, find_toolchain())
    assert all(env is not None and "libtcmalloc_minimal.so.4" in env["LD_PRELOAD"] for env in compiles)


@NEEDS_TCMALLOC
def test_a_users_own_iree_build_runs_on_the_allocator_it_was_built_with(tmp_path: Path, monkeypatch):
    """A sanitizer build, say, must not be handed another malloc: ``--rvv-iree-build`` gets no preload."""
    own = dataclasses.replace(find_toolchain(), build_dir=tmp_path / "iree-build")
    assert all(env is None for env in _compile_environments(tmp_path, monkeypatch, own))
