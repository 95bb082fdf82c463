"""IREE beside its peer (--rvv-peers=onnxruntime): ONNX Runtime's own riscv64 build on the same model, seeded inputs
and QEMU CPU as each riscv64 cell. Generated only with --rvv-peers (without it nothing here is collected).

Per cell: the peer agrees with onnxruntime on the host (the oracle); its work per call is held against its snapshot
(the peer is a fixed point: a change in its work shows); and the peers table's row (IREE and ONNX Runtime side by
side, report/peers.py). A model the peer refuses is an expected failure with ONNX Runtime's one line; no sysroot
(no network) skips with setup's one line.
"""

import pytest

from pytest_rvv.judge.checks import agreement_verdict
from pytest_rvv.judge.peers import check_peer_work


@pytest.mark.rvv_peers
def test_peer_agrees_with_onnxruntime(rvv_peer, rvv_judge):
    rvv_judge(agreement_verdict(rvv_peer().checked))


@pytest.mark.rvv_peers
def test_peer_work_is_as_recorded(rvv_peer, rvv_model, rvv_target, rvv_snapshot, rvv_judge, request):
    work = rvv_peer()
    rvv_judge(check_peer_work(rvv_snapshot, work.snapshot(), rvv_model.name, rvv_target.name,
                              strict=request.config.getoption("rvv_strict_baselines"), own=work.own))


@pytest.mark.rvv_peers
def test_peer_beside_iree(rvv_peer, rvv_judge):
    """The peers table's row: both sides' work per call (IREE's counted run is held against onnxruntime too)."""
    comparison = rvv_peer(beside=True)
    rvv_judge(agreement_verdict(comparison.peer.checked))
