"""Number fields that are no finite number: a hex id read as a float.

Why: a scheduler's task id ("67e49485", Determined AI prints one on every line) reads as
67 x 10^49485, which is infinity; the counter search then asked for ``int(inf)`` and the
whole diagnosis died with an OverflowError.  A field that is no finite number is no
number at all.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from l4.engine import diagnose
from l4.ingest import NodeFile
from l4.scan import scan_node_file


def _job(root, task: str, n_steps: int = 40, fail_at: int | None = None) -> None:
    logs = root / "logs"
    logs.mkdir(parents=True)
    for node in range(3):
        lines = [f"[2025-04-26T01:25:0{node}.000000Z] {task} || INFO: copying files to container"]
        for step in range(1, n_steps + 1):
            if fail_at is not None and node == 1 and step == fail_at:
                lines.append(f"[2025-04-26T01:{25 + step // 60:02d}:{step % 60:02d}.500000Z] {task} "
                             f"[rank={node}] || RuntimeError: CUDA error: an illegal memory access was encountered")
                break
            lines.append(f"[2025-04-26T01:{25 + step // 60:02d}:{step % 60:02d}.000000Z] {task} "
                         f"[rank={node}] || INFO: step {step * 10}: loss={2.5 - step / 100:.4f}")
        (logs / f"node-{node}.log").write_text("\n".join(lines) + "\n")


def test_a_hex_task_id_that_reads_as_infinity_is_no_number(tmp_path):
    _job(tmp_path / "ok", "67e49485")
    _job(tmp_path / "failed", "67e49485", fail_at=25)
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "ok"], store_path=False)
    assert report["nodes"][0]["node"] == "node-1"
    assert report["stage"] == "training"
    assert any(abs(i["iteration"] - 250) <= 10 for i in report["iterations"][:3])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.from_regex(r"[0-9]{1,4}[eE][0-9]{3,6}[a-f0-9]{0,4}", fullmatch=True),
                min_size=1, max_size=4))
def test_any_exponent_like_token_in_any_field_scans(tmp_path_factory, tokens):
    path = tmp_path_factory.mktemp("n") / "n.log"
    path.write_text("".join(f"{' '.join(tokens)} step {k} of 50 x={k}.5\n" for k in range(30)))
    scan = scan_node_file(NodeFile(node="n", path=path, rel="logs/n.log"))
    assert scan.status == "ok" and scan.n_lines == 30
