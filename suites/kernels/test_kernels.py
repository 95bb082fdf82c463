"""Matmul kernels (config/kernels.py): every shape x row (element type) x matmul path of ``--rvv-kernels``.

The same checks as for models, per cell: agreement with the reference, executed instructions per dispatch against
a snapshot (the vectorization gate), and performance against baselines/performance/ (executed work, estimated
silicon cycles, sizes). The dashboard (report/kernels.py) puts the paths side by side.
"""

import pytest

from pytest_rvv.judge.checks import agreement_verdict, check_agreement
from pytest_rvv.judge.peers import check_peer_work


@pytest.mark.rvv_kernels
@pytest.mark.rvv_check("agreement")
def test_kernel_matches_reference(rvv_cell, tmp_path, rvv_judge):
    rvv_judge(check_agreement(rvv_cell(), tmp_path))


@pytest.mark.rvv_kernels
@pytest.mark.rvv_check("agreement")
def test_kernel_still_vectorized_when_run(rvv_executed_vectorization):
    rvv_executed_vectorization()


@pytest.mark.rvv_kernels
@pytest.mark.rvv_check("performance")
def test_kernel_no_more_work(rvv_performance):
    rvv_performance()


@pytest.mark.rvv_kernels
def test_kernel_toolchain_under_test_adds_no_work(rvv_toolchain_comparison):
    """Only with --rvv-compare=SPEC (deselected otherwise): the cell with both toolchains, failing on added work; the
    dashboard before/after ranks every row x shape x path by the work one call adds."""
    rvv_toolchain_comparison()


@pytest.mark.rvv_kernels
def test_published_row_estimated_wall_time_holds(rvv_published, rvv_wall_row):
    """Each published silicon row (report/kernels.py PUBLISHED) whose two cells are selected: the estimated wall
    time's ratio of the two sides (measure/walltime.py, the row's threads) within +-30 % of the measured ratio; the
    rows it is known to miss are strict expected failures that say why (docs/kernels.md)."""
    rvv_wall_row(rvv_published)


@pytest.mark.rvv_kernels
@pytest.mark.rvv_one_path
def test_kernel_peer_work_is_as_recorded(rvv_peer, rvv_model, rvv_target, rvv_snapshot, rvv_judge, request):
    """Only with --rvv-peers=openblas (deselected otherwise): the peer on the cell's seeded A and B agrees with the
    reference, and its work per call is held against its snapshot (a fixed point; once per row x shape)."""
    work = rvv_peer()
    rvv_judge(agreement_verdict(work.checked))
    rvv_judge(check_peer_work(rvv_snapshot, work.snapshot(), rvv_model.name, rvv_target.name,
                              strict=request.config.getoption("rvv_strict_baselines"), own=work.own))


@pytest.mark.rvv_kernels
def test_kernel_beside_peer(rvv_peer, rvv_judge):
    """Only with --rvv-peers=openblas: each IREE path's cell beside the peer (the peers tables' rows: work per call,
    est. X60 ms, and the gap to the fastest peer)."""
    comparison = rvv_peer(beside=True)
    rvv_judge(agreement_verdict(comparison.peer.checked))
