"""Specs of building the project's helpers on first use (base/cbuild.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_rvv.base.cbuild import build_c
from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store


def entries(root: Path) -> list[Path]:
    return [p for p in (root / "c-builds").glob("*/*") if p.is_dir()]


def test_a_helper_whose_fetch_step_fails_is_one_line_and_leaves_no_entry(tmp_path):
    def fetch(work: Path) -> list[str]:
        (work / "half.deb").write_bytes(b"partial")
        raise ToolMissing("apt-get download llvm-22-dev=1 failed: no network")

    store = Store(tmp_path)
    with pytest.raises(ToolMissing, match=r"^apt-get download llvm-22-dev=1 failed: no network$"):
        build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, prepare=fetch, depends=("x",))
    assert entries(tmp_path) == []


def test_a_helper_the_compiler_refuses_is_one_line_naming_it_and_leaves_no_entry(tmp_path):
    with pytest.raises(ToolMissing, match=r"^building rss_probe failed: .*no-such-flag"):
        build_c(Store(tmp_path), "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False,
                flags=("-fno-such-flag",))
    assert entries(tmp_path) == []


@pytest.mark.parametrize(("given", "said"), [
    ({"flags": ("-include", "absent.h")}, r"absent\.h"),
    ({"libraries": ("-l:libabsent.so.9",)}, r"libabsent\.so\.9"),
    ({"prepare": lambda work: (work / "fetched.h").write_text("#error the fetched header was read\n") and
      ["-include", str(work / "fetched.h")]}, r"the fetched header was read"),
])
def test_flags_libraries_and_a_prepare_steps_flags_reach_the_compiler(tmp_path, given, said):
    with pytest.raises(ToolMissing, match=rf"^building rss_probe failed: .*{said}"):
        build_c(Store(tmp_path), "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, **given)


def test_a_helper_built_with_more_is_another_entry_and_the_same_asked_again_is_the_same(tmp_path):
    store = Store(tmp_path)
    plain = build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False)
    given = {"flags": ("-DPROBE_GIVEN=1",), "libraries": ("-lm",), "depends": ("libm 1",)}
    built = build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, **given)
    assert plain != built and len(entries(tmp_path)) == 2
    assert subprocess.run([built, tmp_path / "rss.txt", "true"], capture_output=True).returncode == 0
    assert (tmp_path / "rss.txt").read_text().strip()  # the probe it built runs
    assert build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, **given) == built
    moved = {"flags": (), "libraries": ("-DPROBE_GIVEN=1", "-lm"), "depends": ("libm 1",)}  # the same strings, moved
    assert build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, **moved) != built
