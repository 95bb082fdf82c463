"""The vectorization gate's rules, on snapshot records."""

from pytest_rvv.config.targets import BUILTIN_TARGETS
from pytest_rvv.judge.gate import DRAM_NOISE_LINES, DRAM_NOISE_PERCENT, GateResult, check_gate, check_traffic
from pytest_rvv.judge.vectorization import VectorizationRecord
from pytest_rvv.measure.dispatch_table import Counts

RVV = BUILTIN_TARGETS["rv64gcv-zvl256b"]
SCALAR = BUILTIN_TARGETS["rv64gc"]


def record(**dispatches):
    """dispatches: name=(vector, instructions)."""
    vector = sum(v for v, _ in dispatches.values())
    total = sum(n for _, n in dispatches.values())
    return {
        "totals": {"instructions": total, "vector": vector,
                   "vector_share_percent": round(100 * vector / total, 2) if total else 0.0},
        "dispatches": {k: {"vector": v, "instructions": n, "vectorized": v > 0} for k, (v, n) in dispatches.items()},
    }


def test_scalar_target_with_vector_code_fails_naming_the_dispatches():
    result = check_gate(None, record(dispatch_0_conv=(0, 10), dispatch_1_matmul=(7, 20)), SCALAR, 5.0)
    assert result.violations == [
        "rv64gc is a scalar target but its code has 7 vector instructions: dispatch_1_matmul (7)"]


def test_dispatch_that_lost_its_vector_code_fails_with_counts_before_and_after():
    before = record(dispatch_0_conv=(40, 100), dispatch_1_matmul=(50, 100))
    after = record(dispatch_0_conv=(40, 100), dispatch_1_matmul=(0, 400))
    result = check_gate(before, after, RVV, 100.0)
    assert result.regressions == [
        "dispatch_1_matmul: was vectorized (50 vector of 100 instructions), now scalar (0 vector of 400 instructions)"]


def test_vector_share_falling_more_than_the_threshold_fails():
    before = record(dispatch_0=(50, 100))
    after = record(dispatch_0=(40, 100))
    assert check_gate(before, after, RVV, 5.0).regressions == [
        "vector share fell from 50.00% to 40.00% (-10.00 points; allowed -5)"]
    assert check_gate(before, after, RVV, 10.0).ok


def test_a_lower_vector_share_with_less_executed_work_is_a_change_not_a_regression():
    """Measured: IREE 3.12.0 -> 3.13.0 on the inner-tiled 64^3 f32 matmul executes 77 % fewer instructions, and its
    share falls 7 points because the vector encodes shrank most; devectorized code would execute more, not less."""
    before = record(dispatch_0=(50, 100), dispatch_1=(0, 100))
    after = record(dispatch_0=(10, 20), dispatch_1=(0, 60))
    result = check_gate(before, after, RVV, 5.0, work=True)
    assert not result.regressions
    assert "vector share fell from 25.00% to 12.50% while the model executes 200 -> 80 instructions (a diagnostic: " \
           "the work is the verdict)" in result.changes
    same_work = check_gate(before, record(dispatch_0=(10, 20), dispatch_1=(0, 180)), RVV, 5.0, work=True,
                           added_work=100)  # every dispatch within the upgrade's allowance: only the share can fail
    assert same_work.regressions == ["vector share fell from 25.00% to 5.00% (-20.00 points; allowed -5)"]
    assert check_gate(before, after, RVV, 5.0).regressions  # static counts are not work: the share still gates


def test_gains_are_improvements_not_failures():
    before = record(dispatch_0=(0, 100), dispatch_1=(10, 100))
    after = record(dispatch_0=(30, 90), dispatch_1=(10, 100))
    result = check_gate(before, after, RVV, 5.0)
    assert result.ok
    assert ("dispatch_0: now vectorized (0 vector of 100 instructions -> 30 vector of 90 instructions)"
            in result.improvements)
    assert not any("vector share" in line for line in result.improvements)  # share is a diagnostic
    assert any(line.startswith("vector share rose from 5.00% to") for line in result.changes)


def test_executed_work_per_dispatch_is_the_verdict_not_the_vector_share():
    before = record(dispatch_0=(10, 100), dispatch_1=(50, 1000))
    after = record(dispatch_0=(10, 100), dispatch_1=(1500, 1900))  # more vector, and 1.9x the work
    result = check_gate(before, after, RVV, 5.0, work=True)
    assert result.regressions == ["dispatch_1: executes 1000 -> 1900 instructions (+900, +90.0%)"]
    assert not result.improvements
    assert check_gate(before, after, RVV, 5.0).ok  # static code size alone is not work


def test_work_regressions_are_ranked_by_added_work_and_improvements_by_work_removed():
    """The failure names the dispatch that adds the most work first, whatever its place in the module."""
    before = record(dispatch_0=(10, 100), dispatch_1=(10, 1000), dispatch_2=(10, 500), dispatch_3=(10, 400),
                    dispatch_4=(10, 900))
    after = record(dispatch_0=(10, 110), dispatch_1=(10, 1900), dispatch_2=(10, 800), dispatch_3=(10, 390),
                   dispatch_4=(10, 300))
    result = check_gate(before, after, RVV, 100.0, work=True)
    assert [line.split(":")[0] for line in result.regressions] == ["dispatch_1", "dispatch_2", "dispatch_0"]
    assert [line.split(":")[0] for line in result.improvements] == ["dispatch_4", "dispatch_3"]


def test_a_dispatch_executing_less_is_an_improvement():
    result = check_gate(record(dispatch_0=(10, 100)), record(dispatch_0=(10, 80)), RVV, 5.0, work=True)
    assert result.ok and result.improvements == ["dispatch_0: executes 100 -> 80 instructions (-20, -20.0%)"]


def test_new_and_vanished_dispatches_are_reported_as_changes():
    result = check_gate(record(dispatch_0_a=(5, 10)), record(dispatch_0_b=(5, 10)), RVV, 5.0)
    assert result.ok
    assert result.changes == ["dispatch_0_a: no longer present (fused, split or gone; 5 vector of 10 instructions)",
                              "dispatch_0_b: new dispatch (5 vector of 10 instructions)"]


def test_the_upgrade_review_ranks_added_work_first_then_less_work_then_code_size():
    from pathlib import Path

    from pytest_rvv.report.vectorization import VectorizationSummary

    summary = VectorizationSummary(Path("."), set())
    before, after = record(dispatch_0=(10, 100), dispatch_1=(50, 1000)), record(dispatch_0=(10, 80),
                                                                                dispatch_1=(60, 1900))
    executed = check_gate(before, after, RVV, 5.0, work=True, added_work=5.0)
    upgraded = ("IREE 3.12", "IREE 3.13")
    summary.results[("m", RVV.name, "executed")] = VectorizationRecord(
        "m", RVV.name, "executed", 2980, 70, upgrade=upgraded, work=tuple(executed.work), churn=executed.churn)
    summary.results[("m", RVV.name, "static")] = VectorizationRecord(
        "m", RVV.name, "static", 120, 30, upgrade=upgraded, recorded_totals=Counts(100, 25, True))
    assert summary.review_lines()[:7] == [
        "recorded with IREE 3.12; now IREE 3.13",
        "work added (instructions executed per dispatch, most added first):",
        "  m @ rv64gcv-zvl256b dispatch_1: 1000 -> 1900 (+900, +90.0%)",
        "work removed:",
        "  m @ rv64gcv-zvl256b dispatch_0: 100 -> 80 (-20, -20.0%)",
        "code size (static instructions per model):",
        "  m @ rv64gcv-zvl256b 25 vector of 100 instructions -> 30 vector of 120 instructions",
    ]


def traffic(**dispatches):
    """dispatches: name=(DRAM bytes, executed instructions)."""
    return {k: {"dram_bytes": dram, "instructions": n} for k, (dram, n) in dispatches.items()}


def test_a_dispatch_that_adds_no_instructions_but_doubles_its_dram_traffic_fails_named_with_both():
    """Rule (g): the memory system's added work is added work; ranked by the DRAM bytes each dispatch adds."""
    before = traffic(dispatch_0_pack=(400_000, 5_000), dispatch_1_matmul=(1_200_000, 90_000), dispatch_2_add=(0, 10))
    after = traffic(dispatch_0_pack=(800_000, 5_000), dispatch_1_matmul=(2_400_000, 90_000), dispatch_2_add=(0, 10))
    result = GateResult()
    moves = check_traffic(result, before, after, 64)
    assert result.regressions == [
        "dispatch_1_matmul: DRAM traffic 1.2 MB -> 2.4 MB (+100 %), executed instructions +0.0 %",
        "dispatch_0_pack: DRAM traffic 400 kB -> 800 kB (+100 %), executed instructions +0.0 %"]
    assert [(m.name, m.added) for m in moves] == [("dispatch_1_matmul", 1_200_000), ("dispatch_0_pack", 400_000)]
    assert not result.ok


def test_dram_traffic_below_half_again_is_a_named_change_and_a_third_less_an_improvement():
    """The cache model's figures move with the memory layout (+4 % measured between two environments): a move beyond
    the noise but below +50 % is named as a change and never fails; growing by half again fails."""
    before = traffic(dispatch_0=(1_000_000, 100), dispatch_1=(1_000_000, 100))
    within = GateResult()
    moves = check_traffic(within, before, traffic(dispatch_0=(1_400_000, 100), dispatch_1=(1_000_000, 100)), 64)
    assert within.ok and not within.improvements and [m.name for m in moves] == ["dispatch_0"]
    assert within.changes == ["dispatch_0: DRAM traffic 1 MB -> 1.4 MB (+40 %), executed instructions +0.0 %"]
    grown = GateResult()
    check_traffic(grown, before, traffic(dispatch_0=(1_500_000, 100), dispatch_1=(1_000_000, 100)), 64)
    assert grown.regressions == ["dispatch_0: DRAM traffic 1 MB -> 1.5 MB (+50 %), executed instructions +0.0 %"]
    less = GateResult()
    check_traffic(less, before, traffic(dispatch_0=(500_000, 90), dispatch_1=(1_000_000, 100)), 64)
    assert less.ok and less.improvements == [
        "dispatch_0: DRAM traffic 1 MB -> 500 kB (-50 %), executed instructions -10.0 %"]


def test_dram_traffic_within_the_cache_models_measured_noise_is_never_named():
    """Bytes and accesses are exact; the modelled misses move by up to 0.88 % (97 lines) from run to run: a move within
    DRAM_NOISE_PERCENT and DRAM_NOISE_LINES is never named, one beyond both is named as a change."""
    before = traffic(dispatch_0=(1_000_000, 100), dispatch_1=(10_000, 100))
    noise = traffic(dispatch_0=(1_000_000 + 64 * 97, 100), dispatch_1=(10_000 + 64 * (DRAM_NOISE_LINES - 1), 100))
    exact = GateResult()
    assert check_traffic(exact, before, noise, 64) == [] and exact.ok and not exact.changes
    beyond = GateResult()
    check_traffic(beyond, before, traffic(dispatch_0=(1_030_000, 100), dispatch_1=(10_000, 101)), 64)
    assert beyond.ok and beyond.changes == [
        "dispatch_0: DRAM traffic 1 MB -> 1.03 MB (+3 %), executed instructions +0.0 %"]
    assert 1_000_000 * DRAM_NOISE_PERCENT / 100 < 30_000 and 64 * DRAM_NOISE_LINES > 64 * 97


def test_dram_traffic_is_matched_across_renumbering_and_a_dispatch_without_counts_has_no_instruction_change():
    before = {"dispatch_3_matmul_4x4_f32": {"dram_bytes": 200_000}}
    after = {"dispatch_2_matmul_4x4_f32": {"dram_bytes": 600_000}}
    result = GateResult()
    check_traffic(result, before, after, 64)
    assert result.regressions == ["dispatch_3_matmul_4x4_f32 -> dispatch_2_matmul_4x4_f32: DRAM traffic 200 kB -> "
                                  "600 kB (+200 %)"]
