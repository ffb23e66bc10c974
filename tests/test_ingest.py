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
