"""ONNX Runtime's idle threads follow OMP_WAIT_POLICY as torch's OpenMP does (backends/onnx.open_session)."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from bertscope.backends.onnx import open_session  # noqa: E402

SPINNING = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")


def _identity_graph() -> bytes:
    """The smallest graph ONNX Runtime opens: one Identity."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _spinning(session: object) -> list[str]:
    """Each spinning entry the session was opened with; "" where it kept ONNX Runtime's default."""
    options = session.get_session_options()  # type: ignore[attr-defined]
    entries = []
    for key in SPINNING:
        try:
            entries.append(options.get_session_config_entry(key))
        except RuntimeError:  # ONNX Runtime says an entry never set is missing this way
            entries.append("")
    return entries


@pytest.mark.parametrize("policy", ["PASSIVE", "passive", " Passive "])
def test_a_passive_wait_policy_stops_onnxruntime_threads_spinning(
    monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    assert _spinning(open_session(_identity_graph())) == ["0", "0"]


@pytest.mark.parametrize("policy", [None, "ACTIVE", ""])
def test_other_wait_policies_keep_onnxruntime_default(
    monkeypatch: pytest.MonkeyPatch, policy: str | None
) -> None:
    if policy is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    assert _spinning(open_session(_identity_graph())) == ["", ""]
