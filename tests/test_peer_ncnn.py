"""ncnn as a peer plug-in of the model suites: PyPI's riscv64 wheel in Debian 13's riscv64 Python under the same QEMU
CPU as IREE's cell, the model converted by pnnx.

Real tools: the wheels from the package index, Debian's riscv64 Python, QEMU and its counting plugin, onnxruntime on
the host as the oracle. Without network (no wheel, no sysroot) the tests that need them skip with the one line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from pytest_rvv.base.errors import ToolMissing
from pytest_rvv.base.store import Store
from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.measure.peers import by_library
from pytest_rvv.model.registry import builtin_models
from pytest_rvv.run.ncnn_peer import (
    GUEST_STATUS,
    NCNN_SHA256,
    NCNN_WHEEL,
    PYTHON,
    NcnnRunner,
    _fetch_wheel,
    ncnn_runner,
)
from pytest_rvv.run.ort_harness import PeerRejected
from pytest_rvv.run.peer import COUNTED_ONE, COUNTED_TWO, PEERS, PLAIN, PeerRuns
from pytest_rvv.toolchain.debian_sysroot import SysrootUnavailable

from .conftest import SUITES, USER_CACHE, convs_model, save_model


def runner_for(target: str) -> NcnnRunner:
    try:
        return ncnn_runner(BUILTIN_TARGETS[target])
    except ToolMissing as exc:  # no wheel or sysroot (no network), no QEMU: its one line
        pytest.skip(str(exc))


def oracle(model: Path, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
              for i in session.get_inputs()]
    return inputs, session.run(None, {i.name: x for i, x in zip(session.get_inputs(), inputs, strict=True)})


def test_ncnn_serves_the_float32_models_on_emulated_riscv64_targets_and_says_why_not_the_others():
    models = builtin_models()
    ncnn = PEERS["ncnn"]
    assert ncnn.suite == "models" and ncnn.library == "ncnn"
    assert ncnn.serves(models["squeezenet1.1"], BUILTIN_TARGETS["rv64gcv-zvl256b"]) is None
    assert ncnn.serves(models["squeezenet1.1-f16"], BUILTIN_TARGETS["rv64gcv-zvl256b"]) == \
        "its harness feeds float32 to ncnn, not float16"
    assert ncnn.serves(models["squeezenet1.1"], BUILTIN_TARGETS["aarch64"]) == \
        "aarch64 is not an emulated riscv64 target"
    # int8 QDQ: ncnn quantizes from a calibration table of its own, which its wheel cannot make
    assert ncnn.serves(models["squeezenet1.1-int8"], BUILTIN_TARGETS["rv64gcv-zvl256b"]).startswith(
        "ncnn runs int8 from its own calibration table (ncnn2table and ncnn2int8")


def test_the_header_names_the_models_ncnn_does_not_serve_and_why(project):
    """A refused model is not generated: the session header says which and why, so no cell disappears unnamed."""
    project.write(suite=False)
    shutil.copytree(SUITES / "peers", project.path / "peers", ignore=shutil.ignore_patterns("__pycache__"))
    result = project.run("peers", "--rvv-peers=ncnn,onnxruntime", "--rvv-targets=rv64gc,rv64gcv-zvl256b,host",
                         "--rvv-models=squeezenet1.1,squeezenet1.1-int8,squeezenet1.1-f16", "--collect-only")
    out = result.stdout.str()
    assert "rvv: peers: ncnn beside 2 of 6 model x riscv64 target cells (suites/peers/); not the others: its " \
           "harness feeds float32 to ncnn, not float16 (squeezenet1.1-f16); ncnn runs int8 from its own " \
           "calibration table" in out, out
    assert "not from ONNX QuantizeLinear/DequantizeLinear (squeezenet1.1-int8)" in out
    assert "rvv: peers: onnxruntime beside 6 of 6 model x riscv64 target cells (suites/peers/)\n" in out


def test_a_cnn_agrees_with_onnxruntime_and_runs_ncnns_rvv_kernels_only_where_the_cpu_has_v(tmp_path: Path):
    model = convs_model(tmp_path / "convs.onnx")
    inputs, expected = oracle(model)
    vector = {}
    for target in ("rv64gcv-zvl256b", "rv64gc"):
        runner = runner_for(target)
        runs = PeerRuns(Store(USER_CACHE), None)  # kept by content, as the suites keep them
        plain = runs.run(PLAIN, runner, model, inputs, len(expected), "all", "convs")
        assert plain.outputs[0].shape == expected[0].shape  # ncnn drops the batch axis; the runner gives it back
        np.testing.assert_allclose(plain.outputs[0], expected[0], rtol=1e-4, atol=1e-4)
        one, two = (by_library(runs.run(kind, runner, model, inputs, len(expected), "all", "convs"))
                    for kind in (COUNTED_ONE, COUNTED_TWO))
        own = {name for name in two[0] if name.startswith("ncnn")}
        assert own == {"ncnn.cpython-313-riscv64-linux-gnu.so"}, two[0]
        per_call = {name: two[0][name] - one[0].get(name, 0) for name in two[0]}
        # one call is mostly ncnn's own code: Python's interpreter and the module's load are left out
        assert per_call["ncnn.cpython-313-riscv64-linux-gnu.so"] > 0.5 * sum(per_call.values())
        vector[target] = two[1] - one[1]
    assert vector["rv64gcv-zvl256b"] > 1000, vector  # its _riscv_rvv layers, picked from hwcap
    assert vector["rv64gc"] == 0, vector


def test_a_counted_run_is_the_same_every_time(tmp_path: Path):
    """Python draws a hash seed at start and allocates by address: the harness runs with a fixed seed in QEMU's
    reserved address space, so two fresh counted runs execute exactly the same blocks."""
    model = convs_model(tmp_path / "convs.onnx")
    inputs, expected = oracle(model)
    runner = runner_for("rv64gcv-zvl256b")
    texts = [PeerRuns(Store(tmp_path / f"cache{i}"), None).run(COUNTED_ONE, runner, model, inputs, len(expected),
                                                               "all", "convs").counts.read_text() for i in range(2)]
    assert texts[0] == texts[1]


def test_the_guest_reads_a_fixed_process_status_not_the_emulators(tmp_path: Path):
    """ncnn parses /proc/self/status when it loads; under qemu-user it would read the emulator's, whose pids and
    memory figures change from run to run (two counted runs under load differed in libc's strstr)."""
    runner = runner_for("rv64gcv-zvl256b")
    argv = [str(runner.qemu.path), "-cpu", runner.target.emulator_cpu, "-L", str(runner.sysroot.path),
            str(runner.sysroot.path / PYTHON), "-S", "-B", "-c",
            "import os; print(open('/proc/self/status').read(), end=''); print(os.getpid())"]
    seen = [subprocess.run(argv, capture_output=True, text=True, env={}, cwd=tmp_path, check=True).stdout
            for _ in range(2)]
    assert [text.rsplit("\n", 2)[0] + "\n" for text in seen] == [GUEST_STATUS] * 2
    assert seen[0] != seen[1]  # the pids do differ: the file, not the process, is fixed


def test_the_guest_reads_the_modelled_parts_caches_not_the_hosts(tmp_path: Path):
    """ncnn sizes its work by the L2 and L3 it reads in sysfs; under qemu-user that is the host's, and nsnet2's work
    per call moved by 733k instructions between a 2-core AMD EPYC and a 2-core Intel Xeon. The guest reads the K1's
    (8 X60 harts, 32 KiB L1, 512 KiB L2 per cluster of 4, no L3) on every machine."""
    runner = runner_for("rv64gcv-zvl256b")
    cpu = "/sys/devices/system/cpu"
    read = "; ".join(f"print(open('{cpu}/{name}').read().strip())" for name in (
        "possible", "cpu0/cache/index0/size", "cpu0/cache/index2/size", "cpu5/cache/index2/shared_cpu_map",
        "cpu0/cache/index3/size", "cpu0/cpufreq/cpuinfo_max_freq"))
    argv = [str(runner.qemu.path), "-cpu", runner.target.emulator_cpu, "-L", str(runner.sysroot.path),
            str(runner.sysroot.path / PYTHON), "-S", "-B", "-c", read]
    seen = subprocess.run(argv, capture_output=True, text=True, env={}, cwd=tmp_path, check=True).stdout
    assert seen.split() == ["0-7", "32K", "512K", "f0", "0K", "1600000"]


def test_the_guests_loader_cache_is_the_sysroots_empty_one_not_the_hosts(tmp_path: Path):
    """Without a loader cache of its own the riscv64 loader reads the host's /etc/ld.so.cache (qemu -L finds none under
    the root), and installing a library on the host (tcmalloc) moved OpenBLAS's and ONNX Runtime's work per call."""
    runner = runner_for("rv64gcv-zvl256b")
    argv = [str(runner.qemu.path), "-cpu", runner.target.emulator_cpu, "-L", str(runner.sysroot.path),
            str(runner.sysroot.path / PYTHON), "-S", "-B", "-c", "print(len(open('/etc/ld.so.cache', 'rb').read()))"]
    seen = subprocess.run(argv, capture_output=True, text=True, env={}, cwd=tmp_path, check=True).stdout
    assert Path("/etc/ld.so.cache").stat().st_size > 0  # the host has one, which the guest would otherwise read
    assert seen.split() == ["0"]


def test_what_ncnn_cannot_run_is_one_line_naming_the_model(tmp_path: Path):
    runner = runner_for("rv64gcv-zvl256b")
    model = convs_model(tmp_path / "convs.onnx")
    batch = np.zeros((2, 32, 4, 4), np.float32)
    with pytest.raises(PeerRejected, match=r"^convs: ncnn \(riscv64, rv64gcv-zvl256b\) failed \(exit code 1\): "
                                           r"input 0 has batch 2: ncnn runs one item at a time$"):
        runner.run(model, [batch], tmp_path / "run", 1, name="convs")
    ints = tmp_path / "ints.onnx"
    save_model(ints, [helper.make_node("Neg", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.INT32,
                                                                                             [4])],
               [helper.make_tensor_value_info("y", TensorProto.INT32, [4])])
    with pytest.raises(PeerRejected, match=r"^ints: ncnn's harness feeds float32, this model takes int32$"):
        runner.run(ints, [np.zeros(4, np.int32)], tmp_path / "run2", 1, name="ints")


def test_a_wheel_that_is_not_the_pinned_build_is_refused_in_one_line(tmp_path: Path):
    with pytest.raises(SysrootUnavailable, match=r"^pip download ncnn==1\.0\.20261020 gave ncnn-1\.0\.20261020-cp313-"
                                                 r"cp313-manylinux_2_39_riscv64\.whl \(sha256 72fb4b07316e\), not "
                                                 r".* \(000000000000\): the index serves another build$"):
        _fetch_wheel(tmp_path, NCNN_WHEEL, "0" * 64, "ncnn==1.0.20261020", "manylinux_2_39_riscv64", "3.13",
                     lambda archive, into: None, "ncnn-wheel")
    assert NCNN_SHA256.startswith("72fb4b07316e")
    assert not any(tmp_path.rglob("*.whl"))  # nothing of it is left in the tools cache


def test_ncnns_work_does_not_follow_where_the_checkout_or_the_wheel_is(tmp_path: Path):
    """The guest's Python keeps the harness's and the wheel's paths on its heap, and ncnn's loops follow its buffers'
    alignment: both are reached through one fixed-length directory, so the work ncnn's own library does per call is
    the same from any checkout and any tools folder (a fresh clone in /tmp/ci.* once moved it by 52 instructions)."""
    model = convs_model(tmp_path / "convs.onnx")
    inputs, expected = oracle(model)
    base = runner_for("rv64gcv-zvl256b")
    own = []
    for i, folder in enumerate(("a", "a-checkout-folder-of-another-length/and/deeper")):
        harness = tmp_path / folder / "ncnn_harness.py"
        harness.parent.mkdir(parents=True)
        harness.write_bytes(base.harness.read_bytes())
        packages = tmp_path / folder / "tools" / "site"
        packages.parent.mkdir()
        packages.symlink_to(base.packages.resolve())
        runner = NcnnRunner(base.target, base.qemu, base.sysroot, harness, packages, base.pnnx, base.store)
        runs = PeerRuns(Store(tmp_path / f"cache{i}"), None)
        counted = [by_library(runs.run(kind, runner, model, inputs, len(expected), "all", "convs"))[0]
                   for kind in (COUNTED_ONE, COUNTED_TWO)]
        own.append({name: counted[1][name] - counted[0].get(name, 0) for name in counted[1] if name.startswith("ncnn")})
    assert own[0] == own[1] and own[0]


def test_on_threads_of_its_own_a_call_splits_over_ncnns_workers_and_a_run_that_makes_no_call_writes_nothing(
        tmp_path: Path):
    """``with_threads``: ncnn's OpenMP threads take one call (a board's harts; measure/peer_threads.py keeps the blocks
    that execute as often in two runs of the same content), whose outputs still agree, and whose work over the threads
    is the one-thread call's plus what splitting costs: each thread's two-call run less its one-call run, so what the
    workers do while the net loads (packing its weights) is not the call's. ``--repeat=0`` (the traced runs' baseline:
    the load alone) loads the net and writes no output."""
    from pytest_rvv.config.cores import cache_hierarchy
    from pytest_rvv.measure.peer_threads import measure_peer_threads
    from pytest_rvv.measure.peers import CORE
    from pytest_rvv.model.model import InputSpec, Model
    from pytest_rvv.model.sources import LocalFile
    from pytest_rvv.run.peer import TRACED_ZERO
    from pytest_rvv.session import Oracle

    model = convs_model(tmp_path / "convs.onnx")
    inputs, expected = oracle(model)
    runner = runner_for("rv64gcv-zvl256b")
    runs = PeerRuns(Store(USER_CACHE), None)  # kept by content, as the suites keep them
    one, two = (by_library(runs.run(kind, runner, model, inputs, len(expected), "all", "convs"))
                for kind in (COUNTED_ONE, COUNTED_TWO))
    per_call = sum(two[0].values()) - sum(one[0].values())
    spec = Model("convs", LocalFile(model), (InputSpec("x", (1, 32, 4, 4)),))
    threads = measure_peer_threads(spec, Oracle(model, inputs, expected), runner, runs, 4)
    assert threads.threads == 4 and len(threads.per_thread) > 1
    # measured: 742,189 alone, 745,344 over 4 threads (their waiting passive: a spin at a barrier would count)
    assert per_call < threads.work < 1.02 * per_call, (per_call, threads.per_thread)
    assert all(share < per_call / 2 for share in threads.per_thread)  # the convs' channels go to every thread
    assert runner.with_threads(4).identity() != runner.identity()  # its runs are kept apart from one thread's
    assert runner.with_threads(1).identity() == runner.identity()  # and one thread's are the runs recorded so far
    loaded = runs.run(TRACED_ZERO, runner, model, inputs, len(expected), "all", "convs",
                      caches=cache_hierarchy(CORE).geometry)
    assert loaded.outputs == [] and loaded.counts is not None
