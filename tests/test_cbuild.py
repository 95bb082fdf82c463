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


def test_flags_libraries_and_a_prepare_step_reach_the_compiler_and_key_the_entry(tmp_path):
    store = Store(tmp_path)

    def header(work: Path) -> list[str]:
        (work / "include").mkdir()
        (work / "include" / "extra.h").write_text("#define EXTRA_USED 1\n")
        return [f"-I{work}/include", "-include", "extra.h"]

    plain = build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False)
    given = build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, prepare=header,
                    flags=("-DPROBE_GIVEN=1",), libraries=("-lm",), depends=("extra.h 1",))
    assert plain != given and len(entries(tmp_path)) == 2
    assert subprocess.run([given, tmp_path / "rss.txt", "true"], capture_output=True).returncode == 0
    assert (tmp_path / "rss.txt").read_text().strip()  # the probe built with the fetched header runs
    assert build_c(store, "pytest_rvv.run", ("rss_probe.c",), "rss_probe", shared=False, prepare=header,
                   flags=("-DPROBE_GIVEN=1",), libraries=("-lm",), depends=("extra.h 1",)) == given
