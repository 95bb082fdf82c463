"""IREE's riscv64 runtime built from source: where the source comes from, the cache key, bad input,
and the user's own IREE build (--rvv-iree-build). Builds run the real cmake / clang-22."""

import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from pytest_rvv.base.errors import RvvError, ToolMissing
from pytest_rvv.config.settings import Settings
from pytest_rvv.toolchain.runtime_build import (
    NAMESPACE,
    BuildFailed,
    CrossToolchain,
    NamedSource,
    SourceNotFound,
    build_key,
    build_runtime,
    built_runtimes,
    compiler_commit,
    find_cross_toolchain,
    find_source,
)

from .conftest import USER_TOOLS

VERSION = "IREE compiler version 3.13.0rc20261016 @ 89ece87b89852100c0a4ac3d515e14842d090967"
CLI = Path(sys.executable).parent / "pytest-rvv"


def source_tree(root: Path, cmakelists: str = "cmake_minimum_required(VERSION 3.16)\nproject(x C)\n") -> Path:
    """The shape of an IREE source tree (what find_source and the build check), with its own CMakeLists."""
    (root / "runtime" / "src" / "iree").mkdir(parents=True)
    (root / "third_party" / "flatcc").mkdir(parents=True)
    (root / "third_party" / "flatcc" / "CMakeLists.txt").write_text("")
    (root / "CMakeLists.txt").write_text(cmakelists)
    return root


def option(path: Path) -> NamedSource | None:
    """IREE's source as ``pytest-rvv build-runtime --source PATH`` names it."""
    return NamedSource.given(str(path))


def variable(root: Path) -> NamedSource | None:
    """IREE's source as ``pytest-rvv build-runtime`` is handed it without --source: the settings' (its variable)."""
    return NamedSource.given(None, Settings.resolve(lambda option: None, {}, root).iree_source)


def tarball(tree: Path, path: Path) -> Path:
    with tarfile.open(path, "w:xz") as archive:
        archive.add(tree, arcname="iree")
    return path


def test_the_variable_names_the_source_and_its_file_name_the_commit(tmp_path, monkeypatch):
    archive = tarball(source_tree(tmp_path / "tree"), tmp_path / "iree-runtime-src-b48a5955.tar.xz")
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", str(archive))
    source = find_source(VERSION, variable(tmp_path))
    assert source.path == archive and source.is_tarball and source.commit == "b48a5955"
    assert source.origin == f"PYTEST_RVV_IREE_SRC={archive}"
    assert compiler_commit(VERSION) == "89ece87b89852100c0a4ac3d515e14842d090967"


def test_a_missing_source_says_where_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", str(tmp_path / "nowhere.tar.xz"))
    with pytest.raises(SourceNotFound, match=r"nowhere.tar.xz does not exist; set PYTEST_RVV_IREE_SRC to an IREE "
                                             r"git clone, a directory of IREE source trees or "
                                             r"iree-runtime-src-<commit>.tar.xz files, or one tree or .tar.xz"):
        find_source(VERSION, variable(tmp_path))


def test_without_variable_or_network_the_clone_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)
    monkeypatch.setenv("PYTEST_RVV_IREE_GIT", str(tmp_path / "no-such-repository"))
    with pytest.raises(SourceNotFound, match=r"^no IREE source: `clone --filter=blob:none` of .* failed \(.*\); "
                                             r"set PYTEST_RVV_IREE_SRC") as info:
        find_source(VERSION, variable(tmp_path), workdir=tmp_path)
    assert "\n" not in str(info.value)


def test_a_directory_that_is_not_iree_and_holds_none_is_refused(tmp_path):
    (tmp_path / "src" / "docs").mkdir(parents=True)
    with pytest.raises(RvvError, match=r"src holds no IREE source tree, git clone or iree-runtime-src-<commit>.tar.xz "
                                       r"\(searched recursively\)"):
        find_source(VERSION, option(tmp_path / "src"))


def test_a_tarball_of_the_wrong_shape_is_one_line_and_builds_nothing(tmp_path):
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "README").write_text("not IREE")
    archive = tarball(stray, tmp_path / "other.tar.xz")
    with pytest.raises(RvvError, match=r"other.tar.xz does not hold an IREE source tree in one top-level folder"):
        build_runtime(find_source(VERSION, option(archive)), tmp_path / "tools", log=lambda line: None)
    assert list(built_runtimes(tmp_path / "tools")) == []


def test_the_cache_key_follows_the_source_and_the_cross_compiler(tmp_path):
    tools = CrossToolchain(Path("cmake"), Path("ninja"), Path("/nonexistent/clang-22"), Path("clang++-22"))
    tree = source_tree(tmp_path / "tree")
    a = tarball(tree, tmp_path / "iree-src-b48a5955.tar.xz")
    b = tarball(tree, tmp_path / "iree-src-89ece87b.tar.xz")
    unnamed = tarball(tree, tmp_path / "iree.tar.xz")
    key = build_key(find_source(VERSION, option(a)), tools)
    assert key == build_key(find_source(VERSION, option(a)), tools)
    assert key != build_key(find_source(VERSION, option(b)), tools)  # another commit
    other_cc = CrossToolchain(Path("cmake"), Path("ninja"), Path("/nonexistent/clang-23"), Path("clang++-23"))
    assert key != build_key(find_source(VERSION, option(a)), other_cc)
    assert find_source(VERSION, option(unnamed)).identity().startswith("sha256:")  # no commit: the content


def test_a_failed_build_shows_the_log_tail_and_leaves_nothing_in_the_cache(tmp_path):
    tree = source_tree(tmp_path / "tree", 'cmake_minimum_required(VERSION 3.16)\nmessage(FATAL_ERROR "broken on '
                                          'purpose")\n')
    with pytest.raises(BuildFailed, match=r"IREE runtime build failed to configure the host build tools "
                                          r"\(exit code 1\); full log: .*build-logs/iree-runtime-\w+\.log") as info:
        build_runtime(find_source(VERSION, option(tree)), tmp_path / "tools", log=lambda line: None)
    assert "broken on purpose" in info.value.details
    assert Path(str(info.value).split("full log: ")[1]).is_file()
    assert not list((tmp_path / "tools" / NAMESPACE).rglob("iree-run-module"))


def test_missing_clang_names_the_package(tmp_path):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # cmake and ninja from the venv, no clang
    tree = source_tree(tmp_path / "tree")
    proc = subprocess.run([str(CLI), "build-runtime", "--source", str(tree), "--tools-dir", str(tmp_path / "t")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("pytest-rvv: clang-22 not found: apt-get install clang-22 (Debian bookworm-security;"
                                   " bash scripts/setup.sh system)")


def test_setup_built_a_runtime_that_loads_the_compilers_modules_and_is_found_without_a_flag(project):
    """The runtime from `bash scripts/setup.sh` (.ci/run points it at IREE's source): no flag, no skip."""
    builds = list(built_runtimes(USER_TOOLS))
    assert builds, "no riscv64 runtime in the tools cache: run `bash scripts/setup.sh runtime`"
    assert all(stat.S_IXUSR & built.executable.stat().st_mode for built in builds)
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b", "-v")  # the grid
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["rvv: riscv64 runtime */iree-run-module, built by pytest-rvv from IREE *"])
    result.stdout.fnmatch_lines(["*rvv agreement with onnxruntime (max abs error)*",
                                 "model  rv64gc * rv64gcv-zvl256b", "mlp    *e-* *e-*"])


def fake_build_dir(tmp_path: Path) -> tuple[Path, Path]:
    """An IREE build directory whose tools/iree-compile logs each call, then runs the real compiler."""
    from pytest_rvv.toolchain.toolchain import find_toolchain

    real = find_toolchain().iree_compile
    build, calls = tmp_path / "iree-build", tmp_path / "calls.log"
    (build / "tools").mkdir(parents=True)
    wrapper = build / "tools" / "iree-compile"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return build, calls


def test_your_own_iree_build_replaces_the_wheels_compiler(project, tmp_path, monkeypatch):
    build, calls = fake_build_dir(tmp_path)
    monkeypatch.setenv("PYTEST_RVV_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache: the compiler must run
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host", f"--rvv-iree-build={build}")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"rvv: IREE compiler version * (your IREE build {build}); cache *"])
    assert "--iree-hal-target-device=local" in calls.read_text()


def test_an_iree_build_without_iree_compile_is_one_line(project, tmp_path):
    (tmp_path / "empty-build").mkdir()
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=host",
                         f"--rvv-iree-build={tmp_path / 'empty-build'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --rvv-iree-build */empty-build: no iree-compile in tools/, bin/, "
                                 "install/bin/; build the iree-compile target (or install) there first"])


def test_the_cross_toolchain_is_complete_on_a_set_up_machine():
    try:
        tools = find_cross_toolchain()
    except ToolMissing as exc:
        pytest.fail(f"scripts/setup.sh should have installed it: {exc}")
    assert "clang version 22" in tools.identity()


def test_an_importer_missing_its_python_modules_is_one_line_and_never_cached(project, tmp_path, monkeypatch):
    build, _ = fake_build_dir(tmp_path)
    broken = build / "bin" / "iree-import-onnx"
    broken.parent.mkdir()
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named onnx' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PYTEST_RVV_CACHE_DIR", str(tmp_path / "cache"))
    project.write()
    args = ("correctness/test_compile.py", "--rvv-models=mlp", "--rvv-targets=host", f"--rvv-iree-build={build}")
    result = project.run(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"ToolMissing: {broken} cannot run: ModuleNotFoundError: No module named onnx; "
                                 "install it into that importer's Python environment (e.g. pip install onnx)"])
    from pytest_rvv.toolchain.toolchain import find_toolchain

    # fixed in place (same path, same cache key): it runs now, so no stale failure was cached
    broken.write_text(f'#!/bin/sh\nexec {find_toolchain().iree_import_onnx} "$@"\n')
    project.run(*args).assert_outcomes(passed=1)
