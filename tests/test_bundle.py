"""Bundles: the suites' riscv64 cells written for a RISC-V machine with nothing installed, run there by one POSIX
shell script, and judged back here. The machine is a stand-in: the same script started with qemu-riscv64 as its
launcher (RVV_LAUNCHER), so its times are QEMU's, not silicon's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pytest_rvv.run.qemu import find_qemu

from .conftest import SUITE_COPY_IGNORE, SUITES

TARGETS = "rv64gc,rv64gcv-zvl256b,rv64gcv-zvl256b-zvfh"
VECTOR_256 = "rv64,v=true,vlen=256,elen=64,vext_spec=v1.0"  # QEMU's rv64 with V: no zfh/zvfh


def launcher(cpu: str) -> str:
    return f"{find_qemu('riscv64').path} -cpu {cpu}"


def run_bundle(bundle: Path, results: Path, cpu: str = VECTOR_256, rounds: int = 2) -> subprocess.CompletedProcess:
    """bundle/run.sh under dash (POSIX sh, as on a board), each program started through QEMU."""
    env = {**os.environ, "RVV_LAUNCHER": launcher(cpu), "RVV_REPEAT": str(rounds)}
    return subprocess.run(["dash", str(bundle / "run.sh"), str(results)], capture_output=True, text=True, env=env,
                          check=False, timeout=600)


@pytest.fixture
def bundled(project, tmp_path):
    """mlp on a scalar, a vector and an f16 target, bundled by the suites' own run and run on the stand-in."""
    project.write(models=("mlp",))
    shutil.copytree(SUITES / "performance", project.path / "performance", ignore=SUITE_COPY_IGNORE)
    bundle = tmp_path / "bundle"
    made = project.run("correctness/test_agreement.py", "--rvv-models=mlp", f"--rvv-targets={TARGETS}",
                       f"--rvv-bundle={bundle}")
    made.assert_outcomes(passed=3)
    made.stdout.fnmatch_lines([f"rvv: bundle {bundle}: 3 cells, * MiB; on a riscv64 machine run 'sh run.sh'*"])
    results = tmp_path / "results"
    ran = run_bundle(bundle, results)
    assert ran.returncode == 0, ran.stderr
    return project, bundle, results, ran


def judge(project, results: Path, *args: str, targets: str = TARGETS) -> pytest.RunResult:
    return project.run("correctness/test_agreement.py", "performance/test_performance.py", "--rvv-models=mlp",
                       f"--rvv-targets={targets}", f"--rvv-bundle-results={results}", "-rs", *args)


def test_a_bundle_holds_everything_a_machine_needs_and_nothing_it_must_install(bundled):
    _, bundle, results, ran = bundled
    document = json.loads((bundle / "bundle.json").read_text())
    assert [c["name"] for c in document["cells"]] == ["rv64gc/mlp", "rv64gcv-zvl256b/mlp", "rv64gcv-zvl256b-zvfh/mlp"]
    assert document["cells"][2]["needs"] == ["m", "a", "f", "d", "c", "v", "zfh", "zvfh"]
    assert document["cells"][1]["min_vlen"] == 256
    for program in ("iree-run-module", "facts"):  # static riscv64 executables: nothing to install on the machine
        kind = subprocess.run(["file", "-b", str(bundle / "bin" / program)], capture_output=True, text=True).stdout
        assert "RISC-V" in kind and "statically linked" in kind, kind
    facts = dict(line.split("=", 1) for line in (results / "facts.txt").read_text().splitlines())
    assert facts["v"] == "1" and facts["vlen"] == "256" and facts["isa"].startswith("rv64imafdcv")
    assert ran.stdout.strip().endswith(f"2 cells x 2 rounds in {results}")
    for cell in ("rv64gc/mlp", "rv64gcv-zvl256b/mlp"):
        for run in ("run_1", "run_2"):
            folder = results / "cells" / cell / run
            assert (folder / "rc.txt").read_text() == "0\n" and int((folder / "wall_us.txt").read_text()) > 0
            assert np.load(folder / "output_0.npy").shape == (4, 8)


def test_a_machine_lacking_an_extension_or_the_vlen_refuses_the_cell_in_one_line_before_running_it(bundled, tmp_path):
    _, bundle, results, ran = bundled
    assert ran.stderr.splitlines() == [
        "run.sh: rv64gcv-zvl256b-zvfh/mlp refused: needs zfh zvfh, which this machine's isa "
        f"({dict(line.split('=', 1) for line in (results / 'facts.txt').read_text().splitlines())['isa']}) does "
        "not list"]
    assert not list((results / "cells" / "rv64gcv-zvl256b-zvfh" / "mlp").glob("run_*"))
    narrow = run_bundle(bundle, tmp_path / "vlen128", cpu="rv64,v=true,vlen=128,elen=64,vext_spec=v1.0", rounds=1)
    assert ("run.sh: rv64gcv-zvl256b/mlp refused: compiled for VLEN >= 256, this machine has VLEN 128: it would "
            "run with silently wrong results") in narrow.stderr.splitlines()
    assert (tmp_path / "vlen128" / "cells" / "rv64gc" / "mlp" / "run_1" / "output_0.npy").is_file()
    again = run_bundle(bundle, results, cpu=VECTOR_256 + ",zfh=true,zvfh=true", rounds=1)  # the same folder again
    assert again.returncode == 0 and again.stderr == ""
    assert not list(results.glob("cells/*/*/refused.txt"))
    assert not (results / "cells" / "rv64gc" / "mlp" / "run_2").exists()  # the earlier run's second round is gone


def test_judged_results_agree_as_the_suites_do_and_are_that_machines_numbers(bundled, tmp_path):
    project, _, results, _ = bundled
    judged = judge(project, results, f"--rvv-report={tmp_path / 'report'}", "-v")  # -v: Table 1
    judged.assert_outcomes(passed=4, skipped=2)  # the f16 target's agreement and performance: refused there
    judged.stdout.fnmatch_lines([
        f"rvv: bundle results {results}: machine qemu-*h-vlen256 (qemu, * harts, VLEN 256, kernel *; id *), 3 cells, "
        "rounds=2; refused there: rv64gcv-zvl256b-zvfh; riscv64 cells are judged from it (no QEMU)",
        "*| mlp | rv64gcv-zvl256b on board qemu-*h-vlen256 | *",
        "SKIPPED * rv64gcv-zvl256b-zvfh was refused on qemu-*h-vlen256, which ran the bundle: needs zfh zvfh, *"])
    records = {r["target"]: r for r in json.loads((tmp_path / "report" / "performance.json").read_text())}
    rounds = results / "cells" / "rv64gcv-zvl256b" / "mlp"
    assert records["rv64gcv-zvl256b"]["samples"]["wall_s"] == [  # each round the machine ran is one timed run
        round(int((rounds / r / "wall_us.txt").read_text()) / 1e6, 4) for r in ("run_1", "run_2")]
    assert records["rv64gcv-zvl256b"]["board"]["name"].startswith("qemu-")


def test_a_perturbed_output_fails_agreement(bundled):
    project, _, results, _ = bundled
    output = results / "cells" / "rv64gcv-zvl256b" / "mlp" / "run_1" / "output_0.npy"
    perturbed = np.load(output)
    perturbed.flat[3] += 0.01
    np.save(output, perturbed)
    judged = judge(project, results, "-k", "agreement", targets="rv64gcv-zvl256b")
    judged.assert_outcomes(failed=1)
    judged.stdout.fnmatch_lines(["*mlp on rv64gcv-zvl256b* disagrees with onnxruntime*"])


@pytest.mark.parametrize(("damage", "line"), [
    ("complete", "ERROR: --rvv-bundle-results {results}: run.sh did not finish there (no 'complete'); run it to the "
                 "end again"),
    ("bundle.json", "ERROR: --rvv-bundle-results {results}: no bundle.json: not a bundle's results folder (run.sh "
                    "writes one)"),
    ("toolchain", "ERROR: --rvv-bundle-results {results}: the bundle was built by IREE compiler version 0.0.0; this "
                  "session compiles with IREE compiler version *: judge it with that toolchain (--rvv-iree-build) or "
                  "rebuild the bundle with --rvv-bundle"),
])
def test_a_damaged_or_foreign_results_folder_is_one_line_and_nothing_is_judged(bundled, damage, line):
    project, _, results, _ = bundled
    if damage == "toolchain":
        document = json.loads((results / "bundle.json").read_text())
        document["toolchain"] = "IREE compiler version 0.0.0"
        (results / "bundle.json").write_text(json.dumps(document))
    else:
        (results / damage).unlink()
    judged = judge(project, results)
    assert judged.ret == pytest.ExitCode.USAGE_ERROR
    judged.stderr.fnmatch_lines([line.format(results=results)])
    assert len([ln for ln in judged.stderr.lines if ln.strip()]) == 1


def test_a_truncated_output_or_a_missing_cell_is_one_line_naming_it(bundled):
    project, _, results, _ = bundled
    output = results / "cells" / "rv64gc" / "mlp" / "run_1" / "output_0.npy"
    output.write_bytes(output.read_bytes()[:100])
    shutil.rmtree(results / "cells" / "rv64gcv-zvl256b" / "mlp")
    judged = judge(project, results, "-k", "agreement")
    judged.assert_outcomes(failed=2, skipped=1)
    judged.stdout.fnmatch_lines([f"*ConfigError: {output}: truncated or not a .npy file (*); run the bundle's run.sh "
                                 "again*"])
    missing = results / "cells" / "rv64gcv-zvl256b" / "mlp"
    judged.stdout.fnmatch_lines([f"*ConfigError: --rvv-bundle-results {results}: {missing} has no runs (run.sh "
                                 "stopped early?)*"])


def test_a_run_on_a_modelled_core_is_a_calibration_point_beside_its_estimates(bundled, tmp_path):
    """The stand-in's facts say it is a SpacemiT X60 (uarch spacemit,x60, as K1's kernel reports): each judged cell's
    X60 in-core estimate (from its portable baseline, recorded here with QEMU) and its estimated wall time at the
    bundle's one thread (local-sync; measured on an emulated run of the same target and module, since the bundle's
    results run nothing here) stand beside the measured time, each with its error, in Table 1 and results.json.
    (QEMU's times are not silicon: the numbers check the mechanics only.)"""
    import jsonschema

    from pytest_rvv.report.results import schema

    project, _, results, _ = bundled
    recorded = project.run("performance/test_performance.py", "--rvv-models=mlp", "--rvv-targets=rv64gcv-zvl256b",
                           "--update-baselines")
    recorded.assert_outcomes(passed=1)
    facts = results / "facts.txt"
    facts.write_text(facts.read_text().replace("uarch=qemu", "uarch=spacemit,x60"))
    report = tmp_path / "report"
    judged = judge(project, results, f"--rvv-report={report}", "-v", targets="rv64gcv-zvl256b")  # -v: Table 1
    judged.assert_outcomes(passed=2)
    judged.stdout.fnmatch_lines([
        "*| est. / measured on that machine's core |",
        "| mlp | rv64gcv-zvl256b on board spacemit-x60-*h-vlen256 | *| X60, 1 thread: measured * ms; in-core est. * ms "
        "(* %); est. wall * ms, bound by * (* %) |"])
    document = json.loads((report / "results.json").read_text())
    jsonschema.validate(document, schema())
    (point,) = document["silicon_runs"]
    baseline = json.loads((project.path / "baselines" / "performance" / "rv64gcv-zvl256b" / "mlp.json").read_text())
    estimated = baseline["metrics"]["est_cycles@spacemit-x60"] / 1.6e9
    assert point["core"] == "spacemit-x60" and point["estimated_s"] == pytest.approx(estimated, rel=1e-5)
    assert point["ratio"] == pytest.approx(point["estimated_s"] / point["measured_s"], rel=1e-3)
    assert point["machine"].startswith("spacemit-x60-")
    assert point["error_percent"] == round(100 * (point["ratio"] - 1), 1)
    # the estimated wall time of one call at the bundle's one thread, what bounds it, and its error
    assert point["threads"] == 1 and point["wall_s"] > 0 and point["bound_by"] in ("compute", "L2", "DRAM", "imbalance")
    assert point["wall_ratio"] == pytest.approx(point["wall_s"] / point["measured_s"])
    assert point["wall_error_percent"] == round(100 * (point["wall_ratio"] - 1), 1)


def test_on_a_machine_without_v_the_probe_runs_and_every_vector_cell_is_refused(bundled, tmp_path):
    """The probe is built without V (vlenb read by CSR number only when HWCAP says V), so it runs on any rv64gc,
    e.g. a Scaleway EM-RV1 (T-Head C910, RVV 0.7.1 only) that RISE's runners hand out; only the scalar cell runs."""
    _, bundle, _, _ = bundled
    scalar = run_bundle(bundle, tmp_path / "scalar", cpu="rv64,v=false", rounds=1)
    assert scalar.returncode == 0, scalar.stderr
    facts = dict(line.split("=", 1) for line in (tmp_path / "scalar" / "facts.txt").read_text().splitlines())
    assert facts["v"] == "0" and facts["vlen"] == "0" and "v" not in facts["isa"].split("_")[0][4:]
    assert [line.split(" refused: ")[0] for line in scalar.stderr.splitlines()] == [
        "run.sh: rv64gcv-zvl256b/mlp", "run.sh: rv64gcv-zvl256b-zvfh/mlp"]
    assert scalar.stdout.strip().endswith("1 cells x 1 rounds in " + str(tmp_path / "scalar"))


WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "pytest-rvv.yml"


def workflow() -> dict:
    import yaml

    return yaml.safe_load(WORKFLOW.read_text())


def test_the_workflow_runs_x86_jobs_on_debian_12_and_the_silicon_job_only_where_a_riscv_runner_is_granted():
    jobs = workflow()["jobs"]
    for name in ("suites", "bundle", "judge", "merge"):
        assert jobs[name]["runs-on"] == "ubuntu-24.04" and jobs[name]["container"] == "debian:12", name
        if name != "merge":
            steps = [s.get("run", "") for s in jobs[name]["steps"]]
            assert "bash scripts/setup.sh" in steps and "apt-get install" in steps[0] and "git" in steps[0]
    silicon = jobs["silicon"]
    assert silicon["runs-on"] == "ubuntu-24.04-riscv" and silicon["if"] == "vars.RVV_RISCV_RUNNER == 'true'"
    assert silicon["needs"] == "bundle" and jobs["judge"]["needs"] == "silicon"
    assert "container" not in silicon and "setup.sh" not in str(silicon)  # nothing is installed on the machine


def test_every_option_the_workflow_passes_exists():
    import re
    import sys

    text = WORKFLOW.read_text()
    used = set(re.findall(r"--rvv-[a-z0-9-]+", text))
    helped = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True,
                            cwd=WORKFLOW.parent.parent.parent).stdout
    assert used and used <= set(re.findall(r"--rvv-[a-z0-9-]+", helped)), used - set(re.findall(r"--rvv-[a-z0-9-]+",
                                                                                                   helped))


def test_the_workflows_silicon_and_judge_steps_work_as_written(bundled, tmp_path):
    """The silicon job's step, verbatim, in a folder holding the bundle job's bundle.tar (QEMU as the launcher: the
    stand-in machine); then the judge job's pytest command on its results, with the test project's suites."""
    import shlex

    project, bundle, _, _ = bundled
    jobs = workflow()["jobs"]
    runner = tmp_path / "riscv-runner"
    runner.mkdir()
    subprocess.run(["tar", "-cf", str(runner / "bundle.tar"), "-C", str(bundle.parent), bundle.name], check=True)
    (step,) = [s["run"] for s in jobs["silicon"]["steps"] if "run" in s]
    env = {**os.environ, "RVV_LAUNCHER": launcher(VECTOR_256), "RVV_REPEAT": "1"}
    done = subprocess.run(["bash", "-c", step], cwd=runner, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    judged_dir = tmp_path / "judge"
    judged_dir.mkdir()
    subprocess.run(["tar", "-xf", str(runner / "results.tar"), "-C", str(judged_dir)], check=True)
    (command,) = [s["run"] for s in jobs["judge"]["steps"] if "pytest" in s.get("run", "")]
    args = shlex.split(command.replace("$TARGETS", TARGETS).replace("--rvv-bundle-results=results",
                                                                    f"--rvv-bundle-results={judged_dir / 'results'}"))
    assert args[0] == ".venv/bin/pytest"
    args = [a.removeprefix("suites/") for a in args[1:] if a not in ("-n", "auto")]
    judged = project.run(*args, "--rvv-models=mlp")  # the selection the bundle fixture bundled
    judged.assert_outcomes(passed=4, skipped=2)  # the f16 target: refused on a machine without zvfh


def test_a_cells_needs_are_what_linux_lists_without_hints_or_vlen():
    from pytest_rvv.bundle.writer import BundleCell
    from pytest_rvv.config.targets import BUILTIN_TARGETS, target_from_table

    def needs(target):
        return BundleCell("m", target, Path("m.vmfb"), "main", (), 1).needs

    rva23 = needs(BUILTIN_TARGETS["rva23u64"])
    assert {"zicbop", "zihintntl", "zihintpause"}.isdisjoint(rva23) and "zvl128b" not in rva23
    assert {"v", "zba", "zbb", "zbs", "zvfh", "zvbb"} <= set(rva23)
    custom = target_from_table("b-zmmul", {"arch": "riscv64", "features": ["+zmmul", "+b", "+zve32x"]}, {})
    assert needs(custom) == ("m", "zba", "zbb", "zbs", "v")


def test_bundle_options_that_cannot_work_are_one_line_before_any_test(project, tmp_path):
    project.write(models=("mlp",))
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    refused = project.run("correctness", "--rvv-models=mlp", "--rvv-targets=rv64gc", f"--rvv-bundle={precious}")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines([f"ERROR: --rvv-bundle {precious}: the folder holds something that is not a bundle; "
                                  "give a new or empty folder (an earlier bundle there is replaced)"])
    assert (precious / "thesis.tex").read_text() == "years of work"
    both = project.run("correctness", "--rvv-models=mlp", f"--rvv-bundle-results={tmp_path}",
                       "--rvv-compare=iree-base-compiler==3.12.0")
    both.stderr.fnmatch_lines(["ERROR: --rvv-bundle-results judges one toolchain's bundle; it cannot be combined with "
                               "--rvv-compare*"])
