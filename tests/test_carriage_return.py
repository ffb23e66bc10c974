"""A carriage return ends a line: progress bars written to log files.

tqdm (Hugging Face Trainer's and DeepSpeed's progress bars) rewrites one terminal line with
``\\r``; redirected to a file, thousands of updates share one physical line.  Read as one
line it was cut at ``MAX_LINE`` and the update where training stopped was lost, so a job
whose only counter is its progress bar got no iteration.  The logs here are written by
tqdm itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from l4.ingest import MAX_LINE, ReadStats, read_blocks
from tests.bar_jobs import diagnose_three_nodes

tqdm = pytest.importorskip("tqdm").tqdm


def _lines(path: Path, block_size: int = 8 << 20) -> list[bytes]:
    data = b"".join(read_blocks(path, ReadStats(), block_size=block_size))
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def test_carriage_returns_end_lines_and_crlf_is_one_end(tmp_path):
    p = tmp_path / "n.log"
    p.write_bytes(b"a\rb\r\nc\n\rd")
    assert _lines(p) == [b"a", b"b", b"c", b"", b"d"]


def test_the_last_update_of_a_long_progress_bar_is_kept(tmp_path):
    p = tmp_path / "n.log"
    with p.open("w") as fh:
        bar = tqdm(total=5000, file=fh, mininterval=0, miniters=1, ncols=100)
        for _ in range(4321):
            bar.update(1)
        fh.write("\nRuntimeError: boom\n")
    assert p.stat().st_size > 50 * MAX_LINE  # one physical line far over the cut
    lines = [ln for ln in _lines(p) if ln]
    assert any(b"| 4321/5000 [" in ln for ln in lines)
    assert lines[-1] == b"RuntimeError: boom"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"x", b"yy", b"12", b"\r", b"\n", b"\r\n", b" "]),
                max_size=200),
       st.integers(min_value=1, max_value=16))
def test_lines_are_the_same_whatever_the_block_boundaries(tmp_path_factory, parts, block):
    data = b"".join(parts)
    p = tmp_path_factory.mktemp("cr") / "n.log"
    p.write_bytes(data)
    want = re.split(rb"\r\n|\r|\n", data)
    if want and want[-1] == b"":
        want.pop()
    assert _lines(p, block_size=block) == want  # no line lost or added at a block boundary


def _node(path: Path, stop: int, role: str, total: int = 1000) -> None:
    """One node of a Trainer-style job: header lines, a tqdm bar, a loss dict every 100
    steps (``tqdm.write``), then how the node ended."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write("[INFO|trainer.py:2128] 2026-12-01 10:00:00,000 >> ***** Running training *****\n")
        fh.write(f"[INFO|trainer.py:2134] 2026-12-01 10:00:00,002 >>   Total optimization steps = "
                 f"{total}\n")
        bar = tqdm(total=total, file=fh, mininterval=0, miniters=1, ncols=100)
        for i in range(1, stop + 1):
            bar.update(1)
            if i % 100 == 0:
                bar.write(f"{{'loss': {2.5 - i / 1000:.4f}, 'grad_norm': 1.2, "
                          f"'learning_rate': 5e-05, 'epoch': {i / 1000:.2f}}}", file=fh)
        if role == "crash":
            fh.write('\nTraceback (most recent call last):\n  File "train.py", line 88, in '
                     "<module>\n    trainer.train()\nRuntimeError: CUDA error: an illegal "
                     "memory access was encountered\n")
            bar.close()  # the bar redraws its last count as the process exits
        elif role == "victim":
            fh.write("\n[rank3]:[E1201 10:10:00.000000 123 ProcessGroupNCCL.cpp:616] [Rank 3] "
                     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7301, "
                     "OpType=ALLREDUCE, NumelIn=1, Timeout(ms)=600000) ran for 600012 "
                     "milliseconds before timing out.\n")
            bar.close()
        else:
            bar.close()
            fh.write("[INFO|trainer.py:2400] 2026-12-01 10:30:00,000 >> Training completed.\n")


def test_a_job_whose_only_counter_is_its_progress_bar_gets_its_iteration(tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, lambda p, failed, role: _node(p, 730 if failed else 1000,
                                                                       role))
    assert rep["nodes"][0]["node"] == "node-1"
    assert rep["stage"] == "training"
    # 730 steps done: the 731st was in progress (the redraw after the traceback is no step)
    assert rep["iterations"][0]["iteration"] == 731, rep["iterations"]


def test_text_glued_to_a_bar_update_is_a_line_of_its_own(tmp_path):
    """A bar leaves the cursor at the end of its line: the next print (here the banner that
    starts an evaluation, as Hugging Face Trainer prints it) lands on the same line."""
    p = tmp_path / "n.log"
    with p.open("w") as fh:
        bar = tqdm(total=60, file=fh, mininterval=0, miniters=1, ncols=100)
        for _ in range(25):
            bar.update(1)
            bar.set_postfix(loss="1.6278", refresh=True)
        fh.write("[default0]:***** Running Evaluation *****\n")
        fh.write("a line with 3/9 [it/s] in it stays whole\n")
    lines = [ln for ln in _lines(p) if ln]
    assert lines[-2] == b"[default0]:***** Running Evaluation *****"
    assert re.search(rb"\| 25/60 \[[^\]]*it/s, loss=1\.6278\]$", lines[-3])
    assert lines[-1] == b"a line with 3/9 [it/s] in it stays whole"


_BAR = b"| 3/9 [00:01<00:02, 1.5it/s]"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"x", b"12", b"\r", b"\n", b" ", _BAR, b"[d0]:"]), max_size=120),
       st.integers(min_value=1, max_value=16))
def test_glued_bars_split_the_same_whatever_the_block_boundaries(tmp_path_factory, parts, block):
    data = b"".join(parts)
    p = tmp_path_factory.mktemp("glue") / "n.log"
    p.write_bytes(data)
    whole = _lines(p, block_size=1 << 20)
    assert _lines(p, block_size=block) == whole
    for ln in whole:  # a bar update ends its line; nothing else is cut
        at = ln.find(_BAR)
        assert at < 0 or ln.endswith(_BAR)
    assert b"".join(whole) == re.sub(rb"\r|\n", b"", data)
