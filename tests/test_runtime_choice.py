"""Every toolchain on its own riscv64 runtime: the order of choice, sources by commit, and real runs where two
runtimes live in one cache and where no runtime loads a toolchain's modules."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from pytest_rvv.base.errors import ConfigError, RuntimeNotProvided, RvvError
from pytest_rvv.base.store import Store
from pytest_rvv.comparison.bisect import COULD_NOT_RUN, SKIP, run_selection, verdict_of
from pytest_rvv.config.settings import Settings
from pytest_rvv.toolchain.choice import NEAREST, OWN_COMMIT, NoRuntimeLoads, choose_riscv64
from pytest_rvv.toolchain.iree_source import (
    NamedSource,
    SourceIndex,
    SourceNotFound,
    export_commit,
    find_sources,
    source_from_path,
)
from pytest_rvv.toolchain.runtime_build import NAMESPACE, build_runtime, built_runtimes, cached_build
from pytest_rvv.toolchain.toolchain import Toolchain, compiler_date

from .conftest import USER_TOOLS
from .test_runtime_build import source_tree, tarball

V313 = "IREE compiler version 3.13.0rc20261016 @ 89ece87b89852100c0a4ac3d515e14842d090967"
B48 = "b48a5955575cf8924ffc191f3b0804976e5738b9"
E4A = "e4a3b0405d7d23554da26403658d0e8c3c5ecf25"
DAY = 86400.0


def toolchain(version: str = V313) -> Toolchain:
    return Toolchain(Path("/nonexistent/iree-compile"), Path("/nonexistent/iree-import-onnx"), version)


def cached(tools: Path, commit: str, days_before_compiler: float, built: float = 0.0) -> Path:
    """A runtime build entry in a tools cache (the store's own format), dated relative to V313's compiler."""
    date = compiler_date(V313) - days_before_compiler * DAY

    def build(tmp: Path) -> dict[str, object]:
        (tmp / "iree-run-module").write_text(f"runtime {commit}")
        return {"commit": commit, "origin": f"test {commit[:8]}", "built": built, "source_date": date}

    return Store(tools).get_or_build(NAMESPACE, commit * 2, build).file("iree-run-module")


def test_a_cached_build_of_the_compilers_own_commit_is_taken_without_a_probe(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)
    cached(tmp_path, B48, 56)
    own = cached(tmp_path, "89ece87b89852100c0a4ac3d515e14842d090967", 0)

    def probe(path: Path) -> str | None:
        raise AssertionError(f"probed {path}")

    choice = choose_riscv64(toolchain(), tmp_path, probe)
    assert (choice.executable, choice.how) == (own, OWN_COMMIT)


def test_the_nearest_that_loads_wins_and_a_rejected_one_is_never_taken(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)
    near = cached(tmp_path, B48, 10, built=1.0)  # nearest in history, built first
    far = cached(tmp_path, E4A, 200, built=2.0)  # the newest build: the old rule took it
    farther = cached(tmp_path, "1a6681936a78138f7ae2b0fd9309d28dfe01ac5b", 300, built=3.0)
    probed: list[Path] = []

    def probe(path: Path) -> str | None:
        probed.append(path)
        return "required module 'hal' version mismatch; have 6 but require 7" if path == near else None

    choice = choose_riscv64(toolchain(), tmp_path, probe)
    assert (choice.executable, choice.how) == (far, NEAREST)
    assert probed == [near, far] and farther not in probed
    assert choice.rejected == ("IREE b48a5955575c: required module 'hal' version mismatch; have 6 but require 7",)
    assert "(nearest that loads); rejected: IREE b48a5955575c: required module 'hal'" in choice.describe()


def test_when_none_loads_one_line_names_the_commit_and_where_to_get_its_source(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)
    cached(tmp_path, B48, 10)
    with pytest.raises(NoRuntimeLoads) as info:
        choose_riscv64(toolchain(), tmp_path, lambda path: "version mismatch")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"no riscv64 runtime loads the modules of {V313}: tried IREE b48a5955575c: version "
                           "mismatch; give IREE's source at 89ece87b8985 (no PYTEST_RVV_IREE_SRC): set "
                           "PYTEST_RVV_IREE_SRC to an IREE git clone")


def test_without_any_runtime_or_source_it_is_a_skip_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_RVV_IREE_SRC", raising=False)
    with pytest.raises(RuntimeNotProvided, match=r"^no riscv64 IREE runtime: build one with"):
        choose_riscv64(toolchain(), tmp_path, lambda path: None)


def test_the_source_is_the_one_handed_in_not_the_processs_variable(tmp_path, monkeypatch):
    """Two toolchains of one run may each be handed their own source: the choice never looks the variable up."""
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", str(tmp_path / "not-this-one"))
    cached(tmp_path, B48, 10)
    (tmp_path / "handed").mkdir()
    with pytest.raises(SourceNotFound, match=r"^--source .*handed: .*handed holds no IREE source tree"):
        choose_riscv64(toolchain(), tmp_path, lambda path: "version mismatch",
                       source=NamedSource.given(str(tmp_path / "handed")))
    with pytest.raises(NoRuntimeLoads, match=r"\(no PYTEST_RVV_IREE_SRC\)"):  # none handed: none at all
        choose_riscv64(toolchain(), tmp_path, lambda path: "version mismatch")


def test_the_users_runtime_comes_first(tmp_path):
    mine = tmp_path / "iree-run-module"
    mine.write_text("")
    choice = choose_riscv64(toolchain(), tmp_path, lambda path: "never asked", mine)
    assert choice.executable == mine and choice.how == "yours"


# sources by commit


def test_a_folder_of_tarballs_is_searched_recursively_by_commit(tmp_path):
    tree = source_tree(tmp_path / "tree")
    (tmp_path / "src" / "releases").mkdir(parents=True)
    tarball(tree, tmp_path / "src" / f"iree-runtime-src-{B48[:8]}.tar.xz")
    tarball(tree, tmp_path / "src" / "releases" / f"iree-runtime-src-{E4A[:8]}.tar.xz")
    (tmp_path / "src" / "releases" / "README.md").write_text("not a source")
    index = find_sources(str(tmp_path / "src"))
    assert index is not None and not index.single
    assert sorted(s.commit for s in index.others()) == [B48[:8], E4A[:8]]
    assert index.for_commit(E4A, tmp_path / "work").path.name == f"iree-runtime-src-{E4A[:8]}.tar.xz"
    assert index.for_commit("89ece87b8985", tmp_path / "work") is None


def test_a_folder_with_no_iree_source_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFound, match=r"empty holds no IREE source tree, git clone or "
                                             r"iree-runtime-src-<commit>.tar.xz \(searched recursively\); set "):
        find_sources(str(tmp_path / "empty"))


def test_a_tarball_whose_tree_is_another_commit_than_its_name_says_is_refused(tmp_path):
    tree = source_tree(tmp_path / "tree")
    path = tmp_path / f"iree-runtime-src-{B48[:8]}.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT, pax_headers={"comment": E4A}) as archive:
        archive.add(tree, arcname="iree")  # what `git archive` of E4A records, under B48's name
    with pytest.raises(RvvError, match=rf"holds IREE {E4A[:12]} \(recorded by git archive\), not {B48[:8]} as its "
                                       "name says"):
        source_from_path(path, "test")


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_ALLOW_PROTOCOL": "file"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_a_git_clone_exports_any_commit_with_its_pinned_submodule_and_names_a_missing_one(tmp_path):
    flatcc = tmp_path / "flatcc"
    flatcc.mkdir()
    git("init", "-q", cwd=flatcc)
    (flatcc / "CMakeLists.txt").write_text("# flatcc v1\n")
    git("add", ".", cwd=flatcc)
    git("commit", "-qm", "v1", cwd=flatcc)
    pinned = git("rev-parse", "HEAD", cwd=flatcc)
    (flatcc / "CMakeLists.txt").write_text("# flatcc v2\n")
    git("commit", "-qam", "v2", cwd=flatcc)
    iree = tmp_path / "iree"
    (iree / "runtime" / "src" / "iree").mkdir(parents=True)
    (iree / "runtime" / "src" / "iree" / "x.c").write_text("int x;\n")
    (iree / "CMakeLists.txt").write_text("project(iree)\n")
    git("init", "-q", cwd=iree)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(flatcc), "third_party/flatcc", cwd=iree)
    git("-C", "third_party/flatcc", "checkout", "-q", pinned, cwd=iree)
    git("add", ".", cwd=iree)
    git("commit", "-qm", "iree", cwd=iree)
    commit = git("rev-parse", "HEAD", cwd=iree)

    index = find_sources(str(iree))
    assert index is not None and index.clone == iree
    source = index.for_commit(commit[:10], tmp_path / "work")
    assert source.commit == commit and source.date is not None
    assert (source.path / "third_party" / "flatcc" / "CMakeLists.txt").read_text() == "# flatcc v1\n"
    assert (source.path / "runtime" / "src" / "iree" / "x.c").is_file()
    # a clone without the submodules checked out (the partial clone in the cache): fetched from .gitmodules' URL
    bare = tmp_path / "bare-clone"
    git("clone", "-q", "--no-checkout", str(iree), str(bare), cwd=tmp_path)
    again = export_commit(bare, commit, tmp_path / "work2")
    assert (again.path / "third_party" / "flatcc" / "CMakeLists.txt").read_text() == "# flatcc v1\n"
    with pytest.raises(SourceNotFound, match=rf"^the git clone {iree} lacks IREE commit 89ece87b8985 \(and cannot "
                                             r"fetch it\); `git -C .* fetch origin 89ece87b"):
        export_commit(iree, "89ece87b89852100c0a4ac3d515e14842d090967", tmp_path / "work")


def test_a_runtime_option_for_a_side_that_does_not_exist_is_one_line(tmp_path):
    runtime = tmp_path / "iree-run-module"
    runtime.write_text("")

    def lookup(option):
        return (str(runtime), tmp_path) if option.name == "compare-runtime-riscv64" else None

    with pytest.raises(ConfigError, match=r"^--rvv-compare-runtime-riscv64 .*: there is no reference side; name the "
                                          r"reference toolchain with --rvv-compare=SPEC"):
        Settings.resolve(lookup, {}, tmp_path)


# through the real tools: the runtimes built from ../shared/iree (PYTEST_RVV_IREE_SRC) on this project's machines


def sources_of_the_variable() -> SourceIndex | None:
    """The sources PYTEST_RVV_IREE_SRC names in this test process (.ci/run points it at ../shared/iree)."""
    named = NamedSource.given(variable=os.environ.get("PYTEST_RVV_IREE_SRC"))
    return find_sources(named.location, named.origin) if named is not None else None


def release_runtime(commit: str) -> Path:
    """The cached riscv64 runtime built from ``commit`` (built now from PYTEST_RVV_IREE_SRC when missing)."""
    found = cached_build(USER_TOOLS, commit)
    if found is not None:
        return found.executable
    index = sources_of_the_variable()
    source = index.for_commit(commit, USER_TOOLS / "scratch") if index is not None else None
    if source is None:
        pytest.skip(f"needs IREE {commit[:8]}'s source to build its riscv64 runtime: set PYTEST_RVV_IREE_SRC "
                    "(.ci/run points it at ../shared/iree)")
    return build_runtime(source, USER_TOOLS, log=lambda line: None)[0].executable


def test_two_runtimes_in_the_cache_a_plain_run_takes_the_one_that_loads(project):
    """3.11.0's runtime built after b48a5955's: the newest build, which the old rule took, cannot load 3.13.0."""
    release_runtime(B48)
    release_runtime(E4A)
    commits = [b.commit for b in built_runtimes(USER_TOOLS)]
    assert any(c and B48.startswith(c) for c in commits)
    assert any(c and E4A.startswith(c) for c in commits)
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["rvv: riscv64 runtime */iree-run-module, built by pytest-rvv from IREE b48a5955* "
                                 "(nearest that loads)*"])


def only_runtime(tools: Path, executable: Path) -> Path:
    """A tools folder with the setup's QEMU and exactly one runtime build (the store entry linked in)."""
    tools.mkdir()
    for qemu in USER_TOOLS.glob("qemu-*"):
        (tools / qemu.name).symlink_to(qemu)
    entry = executable.parent
    (tools / NAMESPACE / entry.parent.name).mkdir(parents=True)
    (tools / NAMESPACE / entry.parent.name / entry.name).symlink_to(entry)
    return tools


def test_a_toolchain_no_runtime_loads_is_said_once_and_its_riscv64_cells_are_errors(project, tmp_path, monkeypatch):
    from pytest_rvv.toolchain.environments import environment_of, toolchain_from_spec

    b48 = release_runtime(B48)
    env311 = environment_of(toolchain_from_spec("iree-base-compiler==3.11.0", USER_TOOLS))
    monkeypatch.setenv("PYTEST_RVV_TOOLS_DIR", str(only_runtime(tmp_path / "tools", b48)))
    index = sources_of_the_variable()
    b48_source = index.for_commit(B48, tmp_path / "work") if index is not None else None
    if b48_source is None:
        pytest.skip("needs b48a5955's source tarball (PYTEST_RVV_IREE_SRC; .ci/run points it at ../shared/iree)")
    sources = tmp_path / "sources"  # b48a5955's tree only: 3.11.0's commit cannot be built
    sources.mkdir()
    (sources / b48_source.path.name).symlink_to(b48_source.path)
    monkeypatch.setenv("PYTEST_RVV_IREE_SRC", str(sources))
    project.write()
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc,rv64gcv-zvl256b",
                         f"--rvv-iree-build={env311}", f"--rvv-report={tmp_path / 'report'}")
    result.assert_outcomes(passed=2, errors=2)  # both compile; neither can run
    line = (f"no riscv64 runtime loads the modules of IREE compiler version 3.11.0rc20260316 @ {E4A}: tried IREE "
            "b48a5955: import function hal.* signature mismatch between module and source hal; give IREE's source at "
            "e4a3b0405d7d*")
    result.stdout.fnmatch_lines([f"rvv: riscv64 runtime none: {line} (this toolchain's riscv64 cells are errors: "
                                 "could not run)"])
    result.stdout.fnmatch_lines([f"*NoRuntimeLoads: {line}"])
    assert result.stdout.str().count("rvv: riscv64 runtime none:") == 1
    outcomes = {t["nodeid"].split("::")[-1]: t["outcome"]
                for t in json.loads((tmp_path / "report" / "results.json").read_text())["tests"]}
    assert outcomes == {"test_matches_onnxruntime[mlp-rv64gc]": "could-not-run",
                        "test_matches_onnxruntime[mlp-rv64gcv-zvl256b]": "could-not-run",
                        "test_compiles[mlp-rv64gc]": "passed", "test_compiles[mlp-rv64gcv-zvl256b]": "passed"}
    # a bisect or sweep step in this state is untestable (like `git bisect skip`), not bad
    code, summary = run_selection(env311, ["correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc",
                                           "-p", "no:cacheprovider"], project.path)
    assert (code, verdict_of(code)) == (COULD_NOT_RUN, SKIP)
    assert summary.startswith("could not run: no riscv64 runtime loads the modules of IREE compiler version 3.11.0")
