"""Runs kept by content (run/kept.py): what every emulated run goes through, IREE's, the traced ones and the peers'.

The runs themselves are specified with real QEMU where they are made (test_recorded_runs.py, test_threads.py,
test_peers.py); here, what keeping means, with a build that writes a file."""

from pathlib import Path

import pytest

from pytest_rvv.base.store import Store
from pytest_rvv.run.kept import KeptRuns


def writer(made: list[str], text: str):
    def build(into: Path) -> dict[str, str]:
        made.append(text)
        (into / "out.txt").write_text(text)
        return {"text": text}
    return build


def test_a_kept_run_is_built_once_into_the_store_and_read_back_by_every_later_session(tmp_path):
    made: list[str] = []
    first = KeptRuns(Store(tmp_path)).get_or_build("runs", "k" * 64, writer(made, "a"))
    later = KeptRuns(Store(tmp_path)).get_or_build("runs", "k" * 64, writer(made, "b"))
    assert made == ["a"] and (first.created, later.created) == (True, False)
    assert later.file("out.txt").read_text() == "a" and later.path == first.path


def test_fresh_builds_each_content_once_per_session_reads_nothing_and_keeps_nothing(tmp_path):
    made: list[str] = []
    KeptRuns(Store(tmp_path)).get_or_build("runs", "k" * 64, writer(made, "recorded"))
    fresh = KeptRuns(Store(tmp_path), fresh=True)
    one = fresh.get_or_build("runs", "k" * 64, writer(made, "fresh"))
    again = fresh.get_or_build("runs", "k" * 64, writer(made, "again"))
    other = fresh.get_or_build("peer-runs", "k" * 64, writer(made, "peer"))  # another namespace, another run
    assert made == ["recorded", "fresh", "peer"]
    assert one.created and again.path == one.path and one.file("out.txt").read_text() == "fresh"
    assert other.file("out.txt").read_text() == "peer"
    assert not (tmp_path / "peer-runs").exists()  # nothing new kept in the store
    kept = one.path
    del fresh, one, again, other
    assert not kept.exists()  # a fresh run's files live as long as its KeptRuns


def test_a_build_that_raises_keeps_nothing_and_runs_again_next_time(tmp_path):
    def fails(into: Path) -> dict[str, str]:
        (into / "half.txt").write_text("half")
        raise RuntimeError("killed")

    for fresh in (False, True):
        runs = KeptRuns(Store(tmp_path / str(fresh)), fresh=fresh)
        with pytest.raises(RuntimeError):
            runs.get_or_build("runs", "k" * 64, fails)
        made: list[str] = []
        assert runs.get_or_build("runs", "k" * 64, writer(made, "ok")).file("out.txt").read_text() == "ok"
        assert made == ["ok"]
