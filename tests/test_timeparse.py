"""Clocks as training stacks and the systems under them print them."""

import calendar
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from l4.ingest import NodeFile
from l4.scan import scan_node_file
from l4.timeparse import YEARLESS_MAX, parse_ts, place_yearless


def _utc(*fields) -> float:
    return float(calendar.timegm((*fields, 0, 0, 0)))


def test_formats_to_epoch_seconds():
    assert parse_ts("2024-05-01 12:00:00,250 INFO x") == _utc(2024, 5, 1, 12, 0, 0) + 0.25
    assert parse_ts("2024-05-01T12:00:00.5Z x") == _utc(2024, 5, 1, 12, 0, 0) + 0.5
    # the wall clock as printed: a host's zone-less lines (torchrun, Python's logging) show
    # local time too, and one node's lines must stay on one clock
    assert parse_ts("2024-05-01T14:00:00+02:00 x") == _utc(2024, 5, 1, 14, 0, 0)
    assert parse_ts("[Wed May  1 12:00:00 2024] NVRM: Xid") == _utc(2024, 5, 1, 12, 0, 0)
    assert np.isnan(parse_ts("iteration 100 | loss 2.5"))


def test_syslog_times_get_the_year_of_the_job_they_belong_to():
    """Kernel lines ("Oct  9 12:42:15 host kernel: NVRM: Xid ...") carry no year."""
    v = parse_ts("Oct  9 12:42:15 gpu-a100-0481 kernel: NVRM: Xid 79")
    assert v < YEARLESS_MAX
    ref = _utc(2024, 10, 9, 11, 0, 0)
    assert place_yearless(np.array([v]), ref)[0] == _utc(2024, 10, 9, 12, 42, 15)
    # a job that runs over New Year's Eve
    jan = parse_ts("Jan  1 00:00:05 node-3 kernel: x")
    assert place_yearless(np.array([jan]), _utc(2024, 12, 31, 23, 50, 0))[0] == _utc(2025, 1, 1, 0, 0, 5)
    # dated times pass through; without any dated time a yearless one means nothing
    assert place_yearless(np.array([ref, np.nan]), ref)[0] == ref
    assert np.isnan(place_yearless(np.array([v]), float("nan"))[0])


@given(st.integers(1, 12), st.integers(1, 28), st.integers(0, 23), st.integers(0, 59),
       st.integers(2000, 2040))
def test_yearless_round_trip(month, day, hour, minute, year):
    line = f"{calendar.month_abbr[month]} {day:2d} {hour:02d}:{minute:02d}:07 host kernel: x"
    ref = _utc(year, month, day, 12, 0, 0)
    assert place_yearless(np.array([parse_ts(line)]), ref)[0] == _utc(year, month, day, hour, minute, 7)


def test_iteration_times_are_read_behind_a_container_runtime_prefix(tmp_path):
    """kubectl logs --timestamps puts an RFC 3339 time with "Z" in front of every line."""
    rows = [f"2025-01-30T16:{k // 60:02d}:{k % 60:02d}.123456789Z [default7]:  iteration "
            f"{k:8d}/ 500 | loss: 2.5 |" for k in range(1, 121)]
    path = tmp_path / "w.log"
    path.write_text("\n".join(rows) + "\n")
    scan = scan_node_file(NodeFile("w", path, "w.log"))
    (_, track), = scan.markers.items()
    assert not np.isnan(track.ts).any()
    assert np.allclose(np.diff(track.ts), 1.0)


def test_glog_times_are_read_and_dated_by_the_job():
    """torch, torchrun and NCCL's C++ side print glog stamps with no year; after
    who-prefixes too.  They are yearless times, placed like syslog ones."""
    a = parse_ts("W1201 08:11:41.657000 7427 torch/distributed/elastic/multiprocessing/api.py:1028] x")
    b = parse_ts("0: [rank0]:I1201 08:11:57.100000 7426 run.py:214] it=3 loss=1.0")
    assert a < YEARLESS_MAX and b - a == pytest.approx(15.443, abs=1e-6)
    ref = 1796113609.0  # 2026-12-01
    placed = place_yearless(np.array([a]), ref)[0]
    assert abs(placed - ref) < 86400
    assert math.isnan(parse_ts("IF0408 08:03:57 not a glog stamp"))


def test_c10_bracketed_stamps_without_a_thread_id_are_read():
    """Since torch 2.3 c10 logs "[E0726 19:03:27.741584736 ProcessGroupNCCL.cpp:616] ...":
    no thread id, nanoseconds, in brackets, maybe after a rank tag.  The watchdog's timeout
    is such a line, and a timeout without its time dates nothing."""
    a = parse_ts("[W0726 19:03:20.000000000 socket.cpp:697] [c10d] The IPv6 network addresses")
    b = parse_ts("[rank3]:[E0726 19:03:27.741584736 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught")
    assert a < YEARLESS_MAX and b - a == pytest.approx(7.741584736, abs=1e-5)
    assert math.isnan(parse_ts("[E0726 19:03:27 no file and line here"))


def test_c10_stamps_of_january_to_september_are_read():
    """c10 prints the month times 100 plus the day, unpadded ("[rank12]:[E324 15:38:29...]"
    is 24 March; torchrun's own glog-style lines pad it, "E0324").  Read unpadded, the
    watchdog lines of nine months of the year had no time."""
    a = parse_ts("[rank12]:[E324 15:38:29.094793960 ProcessGroupNCCL.cpp:616] [Rank 12] Watchdog caught")
    b = parse_ts("E0324 15:38:34.796789 385253 torch/distributed/elastic/multiprocessing/api.py:869] failed")
    assert a < YEARLESS_MAX and b - a == pytest.approx(5.701995, abs=1e-5)
    nov = parse_ts("[rank1]:[E1114 06:40:21.179509248 ProcessGroupNCCL.cpp:1595] [PG ID 0")
    ref = 1731566421.0  # 2024-11-14 06:40:21 UTC
    assert place_yearless(np.array([nov]), ref)[0] == pytest.approx(ref + 0.179509248, abs=1e-5)
    # no month 0 or 13, no day 0: "E031" and "E1301" are no stamps
    assert math.isnan(parse_ts("[rank0]:[E031 15:38:29.094793960 ProcessGroupNCCL.cpp:616] x"))
    assert math.isnan(parse_ts("[rank0]:[E1301 15:38:29.094793960 ProcessGroupNCCL.cpp:616] x"))


def test_dates_written_with_slashes_are_read():
    """Hugging Face's and accelerate's example scripts log "%m/%d/%Y %H:%M:%S", Rich's
    handler (ColossalAI) "[%x %X]", some tools "%Y/%m/%d": without them such a job had no
    clock at all."""
    ref = parse_ts("2024-05-01 12:00:00")
    assert parse_ts("05/01/2024 12:00:00 - INFO - transformers.trainer - ***** Running training") == ref
    assert parse_ts("[05/01/24 12:00:00] INFO     colossalai - colossalai - INFO: Booster init") == ref
    assert parse_ts("2024/05/01 12:00:00.250 INFO x") == pytest.approx(ref + 0.25)
    assert parse_ts("25/12/2024 08:00:00 day first where the month cannot be") == parse_ts("2024-12-25 08:00:00")
    # a path or a ratio is no date
    assert math.isnan(parse_ts("loading /data/05/01/2024/shard.bin"))
    assert math.isnan(parse_ts("step 13/40/2024 12:00:61 is nothing"))
