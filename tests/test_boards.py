"""Boards over SSH, end to end: a real OpenSSH server on 127.0.0.1 with a throw-away key, whose "board"
runs commands under qemu-riscv64 (the documented launcher field), through the real suites."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from pytest_rvv.run.qemu import find_qemu

from .conftest import SUITE_COPY_IGNORE, SUITES, slow_model

SSHD = Path("/usr/sbin/sshd")
SSHD_CONFIG = """Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/host_key
AuthorizedKeysFile {dir}/authorized_keys
PidFile {dir}/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
LogLevel ERROR
"""
VLEN = 256


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _privilege_separation_directory() -> None:
    """sshd refuses to start without /run/sshd (made by its service at boot, gone after a reboot without it): make it,
    through sudo as a non-root user, or skip in one line."""
    if Path("/run/sshd").is_dir():
        return
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir()
        return
    made = subprocess.run(["sudo", "-n", "mkdir", "-p", "/run/sshd"], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip("the test sshd needs /run/sshd, which only root can make: sudo mkdir -p /run/sshd")


class Sshd:
    """One sshd on 127.0.0.1 accepting a throw-away key."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        self.folder, self.port = folder, free_port()
        for key in ("host_key", "id"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
        shutil.copy(folder / "id.pub", folder / "authorized_keys")
        (folder / "sshd_config").write_text(SSHD_CONFIG.format(port=self.port, dir=folder))
        _privilege_separation_directory()
        self.process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(folder / "sshd_config")],
                                        stderr=subprocess.PIPE)
        for _ in range(50):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"sshd did not start: {self.process.stderr.read().decode() if self.process.stderr else ''}")

    def options(self, key: Path | None = None) -> list[str]:
        return ["-p", str(self.port), "-i", str(key or self.folder / "id"), "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def sshds(tmp_path_factory):
    if not SSHD.is_file():
        pytest.skip("no OpenSSH server: apt-get install openssh-server (bash scripts/setup.sh system)")
    servers = [Sshd(tmp_path_factory.mktemp("sshd") / name) for name in ("a", "b")]
    yield servers
    for server in servers:
        server.stop()


def board_table(name: str, server: Sshd, workdir: Path, launcher: list[str] | None = None, **extra: str) -> str:
    qemu = str(find_qemu("riscv64").path)
    launch = launcher or [qemu, "-cpu", f"rv64,v=true,vlen={VLEN},elen=64,vext_spec=v1.0"]
    lines = [f"[tool.pytest_rvv.boards.{name}]", f'host = "{getpass.getuser()}@127.0.0.1"',
             f'workdir = "{workdir}"', f"launcher = {json.dumps(launch)}",
             f"ssh-options = {json.dumps(server.options(**extra))}"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def board_project(project, sshds, tmp_path):
    """A project with boards "a" and "b" (two sshd ports) and the correctness, vectorization, performance suites."""
    # the "boards" run QEMU on this host, beside the other xdist worker: a 0.1 s run's minimum CPU time moved by 50-60
    # ms under that load, which a real board's own baseline would not see; these specs are about where runs happen
    # and what is kept, so their time limits are wide (tests/test_performance.py holds the time gate itself)
    project.write(extra=board_table("a", sshds[0], tmp_path / "board-a") + board_table("b", sshds[1],
                                                                                      tmp_path / "board-b")
                  + "\n[tool.pytest_rvv.tolerances]\nwall_s_min = 3\ncpu_s_min = 3\n")
    for suite in ("performance", "vectorization"):
        shutil.copytree(SUITES / suite, project.path / suite, ignore=SUITE_COPY_IGNORE)
    return project


def test_the_suites_run_on_a_board_and_copy_each_file_once(board_project, tmp_path):
    args = ("correctness", "performance", "vectorization/test_executed_vectorization.py", "--rvv-models=mlp",
            f"--rvv-targets=rv64gcv-zvl{VLEN}b", "--rvv-board=a")
    first = board_project.run(*args, "--update-baselines", "-v")  # -v: Table 1
    first.assert_outcomes(passed=3, skipped=1)
    first.stdout.fnmatch_lines([
        f"rvv: board a ({getpass.getuser()}@127.0.0.1): VLEN {VLEN}, kernel *, GNU time yes, perf counters *",
        f"| mlp | rv64gcv-zvl{VLEN}b on board a | *",
        f"SKIPPED * executed counts need QEMU: rv64gcv-zvl{VLEN}b runs on board a"])
    machine = board_project.path / "baselines" / "performance" / "machines" / "a" / f"rv64gcv-zvl{VLEN}b" / "mlp.json"
    recorded = json.loads(machine.read_text())
    assert {"wall_s_min", "cpu_s_min", "board_peak_rss_kb"} <= set(recorded["metrics"])
    assert recorded["machine"]["name"] == "a" and recorded["machine"]["fingerprint"]["vlen"] == str(VLEN)
    assert not (board_project.path / "baselines" / "performance" / f"rv64gcv-zvl{VLEN}b").exists()  # no QEMU counts
    stored = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "board-a" / "cas").iterdir()}
    assert len(stored) == 4  # the VLEN probe, the runtime, the probe module and mlp's: once each, whatever the runs
    assert not list((tmp_path / "board-a" / "runs").iterdir())  # each run's folder is removed
    board_project.run(*args).assert_outcomes(passed=3, skipped=1)  # gated against board a's own baseline
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "board-a" / "cas").iterdir()} == stored


def test_two_boards_two_workers_each_worker_owns_one(board_project, tmp_path):
    result = board_project.run("correctness/test_agreement.py", "--rvv-models=mlp",
                               "--rvv-targets=rv64gc,rv64gcv-zvl128b,rv64gcv-zvl256b", "--rvv-board=a,b", "-n", "2")
    result.assert_outcomes(passed=3)
    for board in ("board-a", "board-b"):  # both boards ran modules
        assert any(p.name.endswith("module.vmfb") for p in (tmp_path / board / "cas").iterdir()), board
    # two workers on one board: each owns its SSH connection, and closing one never cuts the other's runs
    shared = board_project.run("correctness/test_agreement.py", "--rvv-models=mlp",
                               "--rvv-targets=rv64gc,rv64gcv-zvl128b,rv64gcv-zvl256b", "--rvv-board=a", "-n", "2")
    shared.assert_outcomes(passed=3)


def test_a_target_beyond_the_boards_vlen_is_refused_at_start_up(board_project):
    result = board_project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl512b", "--rvv-board=a")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: target rv64gcv-zvl512b is compiled for VLEN >= 512 but board a has VLEN "
                                 f"{VLEN}: it would run with silently wrong results"])


@pytest.mark.parametrize(("case", "line"), [
    ("unreachable", "ERROR: board x (*@127.0.0.1): unreachable (*Connection refused*)"),
    ("wrong key", "ERROR: board x (*@127.0.0.1): authentication failed (*Permission denied*); check its key, "
                  "ssh-options or ~/.ssh/config"),
    ("unknown", "ERROR: --rvv-board: unknown board 'nope'; declare it as [[]tool.pytest_rvv.boards.nope[]] *"),
])
def test_a_board_that_cannot_be_used_is_one_line_naming_it(project, sshds, tmp_path, case, line):
    server = sshds[0]
    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    table = board_table("x", server, tmp_path / "x", key=stranger if case == "wrong key" else None)
    if case == "unreachable":
        table = table.replace(f'"-p", "{server.port}"', f'"-p", "{free_port()}"')
    project.write(extra=table)
    result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc",
                         f"--rvv-board={'nope' if case == 'unknown' else 'x'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])


def test_a_run_killed_or_timed_out_on_the_board_is_one_line_and_leaves_nothing(project, sshds, tmp_path):
    qemu = str(find_qemu("riscv64").path)
    killer = tmp_path / "killer.sh"  # the "board" kills iree-run-module (as an OOM killer would), nothing else
    killer.write_text(f'#!/bin/sh\ncase "$*" in *iree-run-module*) kill -KILL $$;; esac\n'
                      f'exec {qemu} -cpu rv64,v=true,vlen={VLEN},elen=64,vext_spec=v1.0 "$@"\n')
    killer.chmod(0o755)
    project.write(models=("mlp", "slow"), extra=board_table("k", sshds[0], tmp_path / "k", launcher=[str(killer)])
                  + board_table("t", sshds[1], tmp_path / "t"))
    slow_model(project.path / "slow.onnx")
    killed = project.run("correctness/test_agreement.py", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--rvv-board=k")
    killed.assert_outcomes(errors=1)  # the runner's own check (a probe module) is killed: the fixture errors
    killed.stdout.fnmatch_lines(["RunFailed: runtime check failed for target rv64gc: iree-run-module killed by "
                                 "SIGKILL running probe for rv64gc on board k (*)*"])
    slow = project.run("correctness/test_agreement.py", "--rvv-models=slow", "--rvv-targets=rv64gc", "--rvv-board=t",
                       "--rvv-timeout=2")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(["RunFailed: iree-run-module timed out after *s running slow for rv64gc on board t *"])
    for board in ("k", "t"):
        assert not list((tmp_path / board / "runs").iterdir()), board


def test_no_space_on_the_board_is_one_line(project, sshds, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("mounting a 256 KiB tmpfs (a full board disk) needs root")
    try:
        project.write(extra=board_table("full", sshds[0], small))
        result = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc", "--rvv-board=full")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: board full: no space left in {small} for vlen-probe (*No space left on "
                                     "device*); free some or set workdir"])
    finally:
        subprocess.run(["umount", str(small)], check=False)
