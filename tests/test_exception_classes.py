"""An exception line is an exception line whatever its class is called.

Python prints a chained exception as "module.exc.ClassName: message raised:" and the cause
under it; torch.compile's "torch._dynamo.exc.BackendCompilerFailed: backend='inductor'
raised:" names the failing component, though the class name ends in neither Error nor
Exception.  Read as a routine line, it never reached the report, and the cause line under
it (an AssertionError in a lowering) read like the user's bug.
"""

from __future__ import annotations

import pytest

from conftest import write_job
from l4.engine import diagnose
from l4.severity import severity

NODES = ("gpu-a1", "gpu-a2", "gpu-a3")
CHAINED = "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"


@pytest.mark.parametrize("line", [
    CHAINED,
    "requests.exceptions.ConnectTimeout: HTTPSConnectionPool(host='huggingface.co', port=443)",
    "huggingface_hub.errors.LocalEntryNotFoundError: cannot find the requested files",
    "ValueError: bad value",
])
def test_a_qualified_exception_class_reads_as_trouble(line: str) -> None:
    assert severity(line) >= 0.6


@pytest.mark.parametrize("line", [
    "torch.distributed.run: starting the elastic agent",
    "model.layers.Attention: 32 heads",
])
def test_a_module_path_alone_is_no_exception(line: str) -> None:
    assert severity(line) == 0.0


def _node(k: int, *, failed: bool) -> str:
    out = [f"2025-05-01 10:00:0{k} INFO rank {k}: starting"]
    out += [f"2025-05-01 10:0{1 + it // 60}:{it % 60:02d} INFO step {it} loss 2.1" for it in range(1, 40)]
    if failed:
        out += [
            "Traceback (most recent call last):",
            '  File "/opt/train/train.py", line 108, in run',
            "    loss = self.model(**batch).loss",
            '  File "/usr/lib/python3.10/site-packages/torch/_dynamo/output_graph.py", line 1465, in '
            "_call_user_compiler",
            "    raise BackendCompilerFailed(self.compiler_fn, e) from e",
            CHAINED,
            "LoweringException: AssertionError: target: aten.convolution_backward.default",
        ]
    else:
        out.append("2025-05-01 10:02:00 INFO training finished")
    return "\n".join(out) + "\n"


def test_a_chained_exception_class_is_reported(tmp_path):
    failed = write_job(tmp_path / "failed", {h: _node(k, failed=True) for k, h in enumerate(NODES)})
    base = write_job(tmp_path / "base", {h: _node(k, failed=False) for k, h in enumerate(NODES)},
                     status="succeeded")
    rep = diagnose(failed, baselines=[base], store_path=tmp_path / "t.drain3")
    templates = [e["template"] for e in rep["events"]]
    assert any(t.startswith("torch._dynamo.exc.BackendCompilerFailed") for t in templates), templates
