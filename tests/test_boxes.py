"""A report drawn as a box is one message: one event, the rest its context.

Why: torchrun's ``ChildFailedError`` message is a box ("train.py FAILED", "Failures:",
"<NO_OTHER_FAILURES>", "Root Cause (first observed failure):", "error_file: <N/A>",
"traceback : To enable traceback see: ...") and mpirun frames its verdict between rules of
dashes.  Read line by line, each box became six or eight events that say little alone
and buried the cause in the report.  The pure pairing of rules is checked on hand-made
record sequences (and on any sequence, with hypothesis); the whole effect on a real
torchrun run checked into the tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from l4.boxes import MAX_BOX, box_head, boxes, rule_char, rule_columns
from l4.engine import diagnose
from tests.realrun_cases import FIXTURES, unpack

# a node's records: templates by column
T = [
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",  # 0
    "=" * 60,  # 1
    "train.py FAILED",  # 2
    "-" * 60,  # 3
    "Failures:",  # 4
    "<NO_OTHER_FAILURES>",  # 5
    "Root Cause (first observed failure):",  # 6
    "host : <*>",  # 7
    "error_file: <N/A>",  # 8
    "step <*> loss <*>",  # 9
    "Primary job terminated normally, but <*> process returned",  # 10
    "a non-zero exit code. Per user-direction, the job has been aborted.",  # 11
    "mpirun noticed that process rank <*> with PID <*> on node <*> exited on signal <*> (<*>).",  # 12
]
RULES = rule_columns(T)


def test_rules_are_lines_of_one_drawing_character() -> None:
    assert rule_char("=" * 60) == "="
    assert rule_char("  ------------  ") == "-"
    assert rule_char("=====") is None  # too short to be drawn across a report
    assert rule_char("==== pod x ====") is None  # a banner says something
    assert rule_char("-=-=-=-=-=-=") is None
    assert RULES == {1: "=", 3: "-"}


def test_torchrun_box_hangs_from_the_exception_it_is_the_message_of() -> None:
    seq = np.array([9, 9, 0, 1, 2, 3, 4, 5, 3, 6, 7, 8, 1, 9, 9])
    assert boxes(seq, RULES) == [(3, 12)]  # the dashes inside belong to the "=" box
    for pos in range(4, 12):
        if int(seq[pos]) in RULES:
            continue
        assert box_head(seq, boxes(seq, RULES), pos, T, RULES) == 0
    # the exception line itself and lines outside stand alone
    for pos in (0, 1, 2, 13, 14):
        assert box_head(seq, boxes(seq, RULES), pos, T, RULES) is None


def test_a_box_that_hangs_from_nothing_is_led_by_its_first_line() -> None:
    # mpirun: two boxes drawn back to back, neither introduced by the line before
    seq = np.array([9, 3, 10, 11, 3, 3, 12, 3, 9])
    found = boxes(seq, RULES)
    assert found == [(1, 4), (5, 7)]
    assert box_head(seq, found, 3, T, RULES) == 10
    assert box_head(seq, found, 2, T, RULES) == 10  # the head stands for itself
    assert box_head(seq, found, 6, T, RULES) == 12


def test_lone_separators_far_apart_make_no_box() -> None:
    seq = np.array([3] + [9] * (MAX_BOX + 5) + [3, 4])
    assert boxes(seq, RULES) == []
    assert box_head(seq, [], 5, T, RULES) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([1, 3, 9, 4, 5, 10]), max_size=400))
def test_boxes_are_ordered_disjoint_and_closed_by_their_own_rule(cols: list[int]) -> None:
    seq = np.array(cols, dtype=np.int64)
    found = boxes(seq, RULES)
    assert found == sorted(found)
    for k, (lo, hi) in enumerate(found):
        assert 0 <= lo < hi < len(seq) and hi - lo <= MAX_BOX
        assert RULES[int(seq[lo])] == RULES[int(seq[hi])]
        if k + 1 < len(found):
            assert hi <= found[k + 1][0]
    for pos in range(len(seq)):
        head = box_head(seq, found, pos, T, RULES)
        assert head is None or head not in RULES


@pytest.mark.skipif(not (FIXTURES / "case-0.tar.xz").exists(), reason="real-run fixture missing")
def test_real_torchrun_report_is_one_event_with_its_box_as_context(tmp_path: Path) -> None:
    case, truth = unpack("case-0", tmp_path)
    report = diagnose(case / "failed", baselines=[case / b for b in truth["baselines"]], store_path=False)
    templates = [e["template"] for e in report["events"]]
    for body in ("Failures:", "Root Cause (first observed failure):", "error_file", "FAILED"):
        assert not any(body in t for t in templates), (body, templates)
    child = [e for e in report["events"] if "ChildFailedError" in e["template"]]
    assert child, templates
    context = child[0]["examples"][0]["context"]
    assert any("Root Cause (first observed failure)" in line for line in context)
    assert any(line.strip().startswith("exitcode") for line in context)
    # the culprit is still the one the box names, and the peers' error still stands
    assert report["nodes"][0]["node"] == truth["faulty_nodes"][0]


def _agent_box(host: str, rank: int, quoted: str) -> list[str]:
    return ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "=" * 60, "/code/train.py FAILED", "-" * 60, "Failures:", "  <NO_OTHER_FAILURES>",
            "-" * 60, "Root Cause (first observed failure):", "[0]:",
            "  time      : 2026-12-05_22:57:31", f"  host      : {host}",
            f"  rank      : {rank} (local_rank: 1)", "  exitcode  : 1 (pid: 23323)",
            "  error_file: /tmp/torchelastic_x/attempt_0/1/error.json",
            "  traceback : Traceback (most recent call last):",
            '    File "/code/train.py", line 218, in inject',
            "      torch.empty(1 << 44, dtype=torch.float32).fill_(1.0)",
            f"  {quoted}", "  ", "=" * 60]


def _node(host: str, n: int, steps: int, box: list[str] | None, day: int = 5) -> str:
    out = [f"[2026-12-0{day} 22:50:{k:02d}] [rank{2 * n}] step {k + 1} loss {3.0 - 0.01 * k:.3f}"
           for k in range(steps)]
    return "\n".join(out + (box or [])) + "\n"


def test_an_exception_quoted_in_the_box_stays_an_event(tmp_path: Path) -> None:
    """torchrun's box carries the dead rank's exception when the rank recorded it: that
    line is the cause, sometimes its only copy, and stays an event of its own."""
    from conftest import write_job

    ok = write_job(tmp_path / "ok", {f"w{n}": _node(f"w{n}", n, 40, None, day=1) for n in range(3)},
                   status="succeeded", job_id="ok-1")
    oom = ("RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
           "allocate memory: you tried to allocate 70368744177664 bytes. Error code 12 (Cannot allocate memory)")
    peer = "RuntimeError: Connection closed by peer [127.0.0.1]:20361. This is typically caused by a remote worker crashing."
    nodes = {f"w{n}": _node(f"w{n}", n, 20, [peer] + _agent_box(f"w{n}", 2 * n, peer)) for n in (0, 1)}
    nodes["w2"] = _node("w2", 2, 17, _agent_box("w2", 5, oom))
    report = diagnose(write_job(tmp_path / "failed", nodes), [ok], store_path=False)
    templates = [e["template"] for e in report["events"]]
    assert any("DefaultCPUAllocator" in t for t in templates), templates
    assert not any("Root Cause" in t or "error_file" in t or "Failures:" in t for t in templates), templates
    assert report["nodes"][0]["node"] == "w2"
