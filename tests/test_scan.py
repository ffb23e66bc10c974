"""The fast scan must mean the same as feeding every line to drain3, and find step counters."""

import datetime
import random

import numpy as np
import pytest

from l4.ingest import NodeFile
from l4.parse import plain_drain3_templates
from l4.scan import scan_node_file, step_field
from l4.templates import TemplateStore


def _lines(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    fmts = [
        "[rank{r}]: 2024-05-01 12:00:{s:02d},{ms:03d} NCCL INFO Channel {a:02d}/0 : {b} -> {c} via P2P/IPC",
        "[2024-05-01 12:00:{s:02d},{ms:03d}] [INFO] [logging.py:96:log_dist] [Rank 0] step={a}, skipped=0, lr=[{f:.6f}]",
        "2024-05-01 12:00:{s:02d} node-{r}:{b}:{c} [{a}] NCCL INFO comm 0x{h:x} rank {r} nranks 64 - Init COMPLETE",
        " iteration {a:8d}/  500000 | consumed samples: {b} | lm loss: {f:.4E} |",
        "RuntimeError: CUDA error: out of memory on device cuda:{r}",
        "saving checkpoint at iteration {a} to /ckpt/run{r}/iter_{a:07d}",
    ]
    return [rng.choice(fmts).format(
        a=rng.randint(0, 99999), b=rng.randint(0, 9999), c=rng.randint(0, 999),
        s=rng.randint(0, 59), ms=rng.randint(0, 999), r=rng.randint(0, 63), f=rng.random() * 10,
        h=rng.getrandbits(48)) for _ in range(n)]


def _scan(tmp_path, text: str):
    """Scan ``text`` as one node's log file."""
    path = tmp_path / "n.log"
    path.write_text(text)
    return scan_node_file(NodeFile("n", path, "n.log"))


def _groups(ids):
    """Partition of line indices induced by ids (names don't matter, grouping does)."""
    first = {}
    return [first.setdefault(i, len(first)) for i in ids]


def test_fast_scan_groups_lines_exactly_like_plain_drain3(tmp_path):
    lines = _lines(1, 20000)
    path = tmp_path / "n.log"
    path.write_text("\n".join(lines) + "\n")
    plain = plain_drain3_templates(lines)
    store = TemplateStore(None)
    scan = scan_node_file(NodeFile("n", path, "n.log"))
    cols = [store.add(s) for s in scan.shapes]
    fast = [cols[i] for i in scan.seq.tolist()]
    assert len(fast) == len(plain)
    agree = np.mean(np.array(_groups(fast)) == np.array(_groups(plain)))
    assert agree >= 0.99


def test_counts_lines_and_examples(tmp_path):
    text = ("start\n"
            "Traceback (most recent call last):\n"
            '  File "/x.py", line 3, in f\n'
            "    boom()\n"
            "RuntimeError: boom 1\n"
            "\n"
            "RuntimeError: boom 22\n")
    scan = _scan(tmp_path, text)
    assert scan.n_lines == 7 and scan.n_records == 4
    i = scan.shapes.index("RuntimeError: boom <*>")
    assert scan.counts[i] == 2 and scan.first_line[i] == 5 and scan.last_line[i] == 7
    j = scan.shapes.index("Traceback (most recent call last):")
    line, first_text, ctx = scan.examples[j]
    assert line == 2 and ctx == ['  File "/x.py", line 3, in f', "    boom()"]


def test_finds_an_unknown_step_counter_with_its_numbers_and_times(tmp_path):
    rows = []
    for k in range(1, 301):
        rows.append(f"2024-05-01 12:{k // 60:02d}:{k % 60:02d} progress {k * 5} of 1500 ok")
        rows.append(f"2024-05-01 12:{k // 60:02d}:{k % 60:02d} loss {k % 7}.5 grad {k % 3}")
    scan = _scan(tmp_path, "\n".join(rows) + "\n")
    (sid, track), = scan.markers.items()
    assert scan.shapes[sid] == "progress <*> of <*> ok"
    assert track.numbers.dtype == np.float64 and track.numbers.ndim == 1
    assert track.numbers.tolist() == [k * 5 for k in range(1, 301)]
    assert np.allclose(np.diff(track.ts), 1.0)


def test_step_field():
    assert step_field([[3, 10], [3, 20], [3, 30]]) == (1, 10)
    assert step_field([[1.5], [2.5], [3.5]]) is None
    assert step_field([[5], [4], [3]]) is None


def test_a_counter_that_logs_its_first_step_and_then_every_nth_counts(tmp_path):
    # "[batch=1/4539]:" then every 100th batch: the first line is off the grid
    assert step_field([[k, 4539] for k in (1, 100, 200, 300, 400)]) == (0, 100)
    assert step_field([[k] for k in (0, 50, 100, 150)]) == (0, 50)
    # one odd advance later on is still no counter
    assert step_field([[k] for k in (100, 200, 300, 301, 400)]) is None
    rows = []
    for k in [1, *range(100, 3500, 100)]:
        rows += [f"[batch={k}/4539]:", f"\t Train time/batch: {k - 1}", f"\t Train loss: {k % 7}.25"]
    scan = _scan(tmp_path, "\n".join(rows) + "\n")
    counts = [t.numbers.tolist() for t in scan.markers.values()]
    assert [1.0, *map(float, range(100, 3500, 100))] in counts


def test_a_step_printed_by_several_ranks_in_any_order_still_counts():
    # four ranks print each step; the slow one prints "iter 6" after another's "iter 7"
    interleaved = [[v, 50] for v in (1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 3, 3, 4, 4, 5, 4, 5, 5, 5)]
    assert step_field(interleaved) == (0, 1)
    # every rank prints its own number once, in any order: ranks, not steps
    ranks = [[v, 8] for v in (25, 24, 27, 26, 29, 28, 31, 30)]
    assert step_field(ranks) is None


def test_a_counter_with_a_few_skipped_counts_still_counts():
    # another line shape drew the missing counts; most advances are one step
    counts = [10, 20, 30, 50, 60, 70, 80, 100, 110, 120, 130, 140]
    assert step_field([[c % 7, c] for c in counts]) == (1, 10)
    # uneven advances with no total to count towards are no counter
    assert step_field([[v] for v in (3, 6, 12, 15, 27, 30, 42)]) is None


def test_a_progress_bar_redrawn_unevenly_counts_its_steps_not_its_percentage():
    # tqdm redraws when time allows: its counts advance unevenly, its percentage evenly
    counts = [3640, 3660, 3670, 3700, 3710, 3720, 3760, 3770, 3790, 3800]
    rows = [[100 * c // 4000, c, 4000, 6, 24, 16, 35, 53, 6.33] for c in counts]
    assert step_field(rows) == (1, 10)


def test_a_bar_redrawn_at_an_epochs_end_and_start_still_counts_across_epochs():
    """tqdm redraws by time, and at an epoch's end (4728/4728) and the next one's start
    (1/4728): a Lightning bar that gained "val_loss=" after the first evaluation counts
    on over epochs, though its advances are uneven where an epoch turns."""
    counts = [1300 + 100 * k for k in range(35)] + [4728, 1, 72, 172, 272]
    rows = [[0 if k < 36 else 1, 100 * c // 4728, c, 4728, 21, 8.3] for k, c in enumerate(counts)]
    assert step_field(rows) == (2, 1)
    # values that merely stay below a constant, back and forth, are no count
    assert step_field([[v, 50] for v in (3, 40, 12, 44, 7, 31, 2, 49, 18)]) is None


def test_a_long_bars_percentage_is_no_counter():
    """On a bar of 4944 steps redrawn every 50, the percentage creeps up by one at every
    redraw ("1%| | 50/4944", "2%| | 100/4944"), as evenly as a counter; it is the count over
    the total, and the count is the bar's counter (the first redraw, 1/4944, off its grid)."""
    counts = [1] + list(range(50, 1300, 50))
    rows = [[0, 100 * c // 4944, c, 4944, 3, 92, 10.5] for c in counts]
    assert step_field(rows) == (2, 50)


def _clock(sec: int) -> str:
    h, rest = divmod(sec, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


def test_a_progress_bar_whose_clocks_change_form_keeps_counting_steps(tmp_path):
    # tqdm's remaining time is an estimate that wobbles with the step rate: around ten
    # hours it reads "9:59:12" and "10:00:41" in turn, and each form is a shape of its own
    rng = random.Random(7)
    total = 17500
    rows = [f"{100 * k // total:3d}%|##        | {k}/{total} "
            f"[{_clock(3 * k)}<{_clock(36000 + rng.randint(-900, 900))},  2.85s/it]"
            for k in range(20, 3000, 20)]
    scan = _scan(tmp_path, "\n".join(rows) + "\n")
    seen = sorted(v for t in scan.markers.values() for v in t.numbers.tolist())
    assert seen == list(range(20, 3000, 20))


def test_a_counter_whose_remaining_time_crosses_hours_and_days_keeps_counting(tmp_path):
    # Python prints a timedelta as "1 day, 7:03:17", later "23:48:01" and "9:51:51": the
    # days and the hours' digit count change as the estimate runs down, and a counter
    # line that carries it must stay one shape with every step on it
    steps = range(100, 15000, 100)
    rows = []
    for k in steps:
        left = datetime.timedelta(seconds=int(2.9 * (15000 - k) * 4))
        rows.append(f"Epoch 1 | iter {4 * k} step {k} | loss train: 2.861, val: 2.998 | "
                    f"iter time: 2794.09 ms (step) remaining time: {left}")
    scan = _scan(tmp_path, "\n".join(rows) + "\n")
    seen = sorted(v for t in scan.markers.values() for v in t.numbers.tolist())
    assert seen == list(steps)


def test_a_bar_whose_percentage_skips_counts_its_steps():
    # 50 of 4400 steps per line: the percentage creeps 1, 2, 3, 4, 5, 6, 7, 9 (it skips),
    # the count advances by 50 every time
    rows = [[100 * c // 4400, c, 4400, 6.3] for c in range(50, 1600, 50)]
    assert step_field(rows) == (1, 50)


def test_a_bar_keeps_its_steps_apart_from_another_bar_of_the_same_look(tmp_path):
    """The training bar passes an hour of elapsed time (its "[59:58<1:05:02" becomes
    "[1:00:01<1:04:59"): still one counter.  The evaluation bars drawn between its
    redraws look the same ("7/20 [00:03<00:05"), but count to another total: not its
    steps, else the job's step would read as a restart at 0."""
    total = 17500
    rows = []
    for k in range(20, 3000, 20):
        rows.append(f"{100 * k // total:3d}%|##        | {k}/{total} "
                    f"[{_clock(3 * k)}<{_clock(3 * (total - k))},  3.00s/it]")
        if k % 500 == 0:
            rows += [f"{5 * e:3d}%|#         | {e}/20 [{_clock(e // 2)}<{_clock((20 - e) // 2)},  "
                     "2.10it/s]" for e in range(0, 21, 4)]
    scan = _scan(tmp_path, "\n".join(rows) + "\n")
    tracks = [t.numbers.tolist() for t in scan.markers.values()]
    assert list(range(20, 3000, 20)) in tracks, [t[:5] for t in tracks]


def test_a_bar_with_the_global_step_counts_the_global_step():
    """A resumed job's bar counts this epoch ("95/925") and names the global step beside
    it ("global_step=1019"): both advance by 5 at every redraw, and only the global one
    goes on where the epoch starts over, so it is the job's iteration."""
    rows = [[p, 925, p - 1, 924 + p] for p in (90, 95, 100, 105, 110)]
    assert step_field(rows) == (3, 5)
    # without a global count the bar's own count (the first field) still counts
    assert step_field([[p, 925, p - 1] for p in (90, 95, 100, 105, 110)]) == (0, 5)


def test_a_time_the_line_reports_does_not_date_the_nodes_last_line(tmp_path):
    """torchrun's failure summary comes last and states when the first worker failed, in
    whole seconds ("time : 2026-12-04_11:17:40"); the node's log ended with the line
    printed at 11:17:42.782 before it, not at the failure it reports."""
    text = ("[default0]:2026-12-04 11:17:40,512 INFO train: [Epoch 2][Batch 32] loss: 0.47\n"
            "E1204 11:17:42.782000 14688 torch/distributed/elastic/multiprocessing/api.py:1002]"
            " failed (exitcode: 1) local_rank: 0 (pid: 14714) of binary: python\n"
            "Root Cause (first observed failure):\n"
            "[0]:\n"
            "  time      : 2026-12-04_11:17:40\n"
            "  host      : dgx2-01\n"
            "  rank      : 3 (local_rank: 0)\n"
            "  exitcode  : 1 (pid: 14714)\n")
    scan = _scan(tmp_path, text)
    # the glog line (no year: placed in the job's year when the job is merged)
    assert scan.node_last_ts < 10**9
    assert scan.node_last_ts % 86400 == pytest.approx(11 * 3600 + 17 * 60 + 42.782)
