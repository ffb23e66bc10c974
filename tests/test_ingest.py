"""Job discovery and streaming reads, including the bad inputs SREs actually get."""

import gzip
import json

import pytest

from l4.ingest import MAX_LINE, JobError, ReadStats, discover, node_id_for, read_blocks
from l4.scan import scan_node_file


def test_node_ids_and_nested_files(tmp_path):
    (tmp_path / "logs" / "host-a").mkdir(parents=True)
    (tmp_path / "logs" / "host-a" / "worker-17.out").write_text("x\n")
    (tmp_path / "logs" / "worker-3.log.gz").write_bytes(gzip.compress(b"y\n"))
    (tmp_path / "logs" / "notes.md").write_text("ignored")
    (tmp_path / "job.json").write_text(json.dumps({"job_id": "j1", "config_id": "c"}))
    spec = discover(tmp_path)
    assert spec.job_id == "j1" and spec.config_id == "c"
    assert sorted(f.node for f in spec.files) == ["worker-17", "worker-3"]
    assert {f.rel for f in spec.files} == {"logs/host-a/worker-17.out", "logs/worker-3.log.gz"}
    assert node_id_for(tmp_path / "a.b.log") == "a.b"


def test_job_json_can_map_files_to_nodes(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "out-0.txt").write_text("x\n")
    (tmp_path / "job.json").write_text(json.dumps({"nodes": {"logs/out-0.txt": "gpu-a"}}))
    assert [f.node for f in discover(tmp_path).files] == ["gpu-a"]


def test_missing_and_empty_jobs_get_clear_errors(tmp_path):
    with pytest.raises(JobError, match="does not exist"):
        discover(tmp_path / "nope")
    (tmp_path / "logs").mkdir()
    with pytest.raises(JobError, match="no node log files"):
        discover(tmp_path)


def test_bad_job_json_is_a_warning_not_a_crash(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "n.log").write_text("x\n")
    (tmp_path / "job.json").write_text("{not json")
    spec = discover(tmp_path)
    assert spec.files and any("job.json" in w for w in spec.warnings)


def test_truncated_gzip_keeps_what_was_read(tmp_path):
    data = gzip.compress(b"".join(b"line %d ok\n" % i for i in range(50000)))
    path = tmp_path / "n.log.gz"
    path.write_bytes(data[: len(data) // 2])
    stats = ReadStats()
    text = b"".join(read_blocks(path, stats))
    assert stats.truncated and "ends early" in stats.error
    assert text.count(b"\n") > 1000


def test_a_50mb_single_line_costs_one_cut_line(tmp_path):
    path = tmp_path / "n.log"
    with open(path, "wb") as fh:
        fh.write(b"before\n")
        fh.write(b"x" * (50 << 20))
        fh.write(b"\nafter\n")
    stats = ReadStats()
    lines = b"".join(read_blocks(path, stats, block_size=1 << 20)).split(b"\n")
    assert lines[0] == b"before" and lines[2] == b"after"
    assert len(lines[1]) == MAX_LINE and stats.long_lines == 1


def test_scan_reports_non_utf8_binary_and_empty(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "latin.log").write_bytes("caf\xe9 error here\n".encode("latin-1") * 3)
    (tmp_path / "logs" / "junk.log").write_bytes(bytes(range(256)) * 40 + b"\nok line\n")
    (tmp_path / "logs" / "empty.log").write_bytes(b"")
    spec = discover(tmp_path)
    scans = {f.node: scan_node_file(f) for f in spec.files}
    assert any("not valid UTF-8" in w for w in scans["latin"].warnings)
    assert scans["latin"].counts.sum() == 3
    assert any("binary" in w for w in scans["junk"].warnings)
    assert scans["empty"].status == "empty"


# --- property tests: arbitrary bytes never break reading or scanning --------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_LINEISH = st.lists(
    st.one_of(st.binary(max_size=200), st.sampled_from(
        [b"\n", b"\r", b"\r\n", b"\x00", b"\xff\xfe", b"x" * 5000, b"iteration 12/100 loss 2.0\n",
         "Temp\xe9rature\n".encode("latin-1")])),
    max_size=40).map(b"".join)


def _expected_lines(data: bytes) -> list[bytes]:
    """What read_blocks must yield: every line, cut to MAX_LINE, no line lost or added; a
    carriage return ends a line as a newline does, and CRLF is one line end."""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [ln[:MAX_LINE] for ln in lines]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_LINEISH, block=st.sampled_from([64, 4097, 1 << 16]), gz=st.booleans())
def test_read_blocks_keeps_every_line_of_arbitrary_bytes(tmp_path_factory, data, block, gz):
    path = tmp_path_factory.mktemp("h") / ("n.log.gz" if gz else "n.log")
    path.write_bytes(gzip.compress(data) if gz else data)
    stats = ReadStats()
    blocks = list(read_blocks(path, stats, block_size=block))
    assert stats.error is None
    got = b"".join(blocks)
    assert _expected_lines(got) == _expected_lines(data)
    assert all(len(b) <= max(block, MAX_LINE + 1) + MAX_LINE + 1 for b in blocks)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_LINEISH, st.binary(max_size=3000)), gz=st.booleans(),
       cut=st.integers(min_value=0, max_value=100))
def test_scan_never_raises_on_arbitrary_bytes(tmp_path_factory, data, gz, cut):
    """Any bytes, plain, gzipped or a gzip cut anywhere: a scan with a status, never an
    exception, and no more lines than the bytes hold (a line ends at ``\n`` or ``\r``)."""
    from l4.ingest import NodeFile

    root = tmp_path_factory.mktemp("s")
    raw = gzip.compress(data) if gz else data
    if gz and cut:
        raw = raw[: len(raw) * cut // 100]
    path = root / ("n.log.gz" if gz else "n.log")
    path.write_bytes(raw)
    scan = scan_node_file(NodeFile(node="n", path=path, rel=path.name))
    assert scan.status in ("ok", "empty", "partial", "error")
    assert scan.n_lines <= data.count(b"\n") + data.count(b"\r") + 1
    if not gz:
        assert scan.n_lines == len(_expected_lines(data)) or scan.status == "empty"


def test_gzip_bomb_inflates_one_block_at_a_time(tmp_path):
    """256 MB of NULs in ~250 KB of gzip: reading stays within a few blocks of memory."""
    import tracemalloc
    import zlib

    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    path = tmp_path / "bomb.log.gz"
    with open(path, "wb") as fh:
        for _ in range(16):
            fh.write(comp.compress(bytes(16 << 20)))
        fh.write(comp.flush())
    stats = ReadStats()
    tracemalloc.start()
    n = sum(len(b) for b in read_blocks(path, stats, block_size=1 << 20))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert stats.bytes_read == 256 << 20 and n <= MAX_LINE + 1
    assert peak < 16 << 20, f"peak {peak >> 20} MB while inflating"


def test_non_regular_log_entries_are_listed_never_opened(tmp_path):
    import os

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "ok.log").write_text("x\n")
    os.mkfifo(logs / "pipe.log")
    (logs / "dir.log").mkdir()
    (logs / "gone.log").symlink_to(tmp_path / "missing")
    (logs / "a.log").symlink_to(logs / "b.log")
    (logs / "b.log").symlink_to(logs / "a.log")
    spec = discover(tmp_path)
    assert [f.node for f in spec.files] == ["ok"]
    why = {u["file"]: u["error"] for u in spec.unreadable}
    assert "FIFO" in why["logs/pipe.log"] and "directory" in why["logs/dir.log"]
    assert "broken symlink" in why["logs/gone.log"] and "symlink loop" in why["logs/a.log"]
    stats = ReadStats()  # even if handed the FIFO directly, it is not read (no writer: no hang)
    assert list(read_blocks(logs / "pipe.log", stats)) == [] and "FIFO" in stats.error
