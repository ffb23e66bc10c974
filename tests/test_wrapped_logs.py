"""Logs stored by a container runtime: every line wrapped with the time it was written.

Why: on Kubernetes an SRE's logs are the runtime's files (containerd/CRI-O, Docker's
json-file driver, ``kubectl logs --timestamps``), not what the program printed.  Read as
they were, the wrapper led every line: tracebacks lost their indentation, rank tags their
place, JSON escapes changed the words, and on 40 third-generator jobs rewritten that way
events F1 fell from 0.97 to 0.88-0.90, node@1 from 0.95 to 0.88, stage from 0.98 to
0.60-0.73 and iteration from 0.91 to 0.74-0.83.  ``l4.wrapped`` unwraps them as they stream and keeps each line's write time.
"""

from __future__ import annotations

import json
import math
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from l4.engine import diagnose
from l4.ingest import ReadStats
from l4.timeparse import parse_ts
from l4.wrapped import Unwrapper, read_unwrapped, sniff, unwrap_lines
from tests.realrun_cases import FIXTURES, unpack

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks" / "realruns"))
from runtime import records, rfc3339nano  # noqa: E402

T0 = 1_764_000_000_123_456_789  # ns (kubectl prints nanoseconds)


def _wrap(kind: str, lines: list[bytes], times_ns: list[int]) -> bytes:
    if kind == "elastic":  # an Elasticsearch/Loki export: time first, metadata, "message"
        return b"".join(json.dumps({"@timestamp": rfc3339nano(t), "kubernetes": {"pod": "w-1"},
                                    "message": ln.decode("utf-8", "surrogateescape")},
                                   ensure_ascii=k % 2 == 0).encode("utf-8", "surrogateescape") + b"\n"
                        for k, (ln, t) in enumerate(zip(lines, times_ns, strict=True)))
    if kind == "journald":  # journalctl -o json: microseconds since the epoch
        return b"".join(json.dumps({"__REALTIME_TIMESTAMP": str(t // 1000), "_HOSTNAME": "n1",
                                    "MESSAGE": ln.decode("utf-8", "surrogateescape")}).encode() + b"\n"
                        for ln, t in zip(lines, times_ns, strict=True))
    if kind == "kubectl":
        return b"".join(rfc3339nano(t).encode() + b" " + ln + b"\n"
                        for ln, t in zip(lines, times_ns, strict=True))
    streams = ("stdout", "stderr")
    return b"".join(records(kind, ln + b"\n", streams[k % 2], t)
                    for k, (ln, t) in enumerate(zip(lines, times_ns, strict=True)))


def _read(path: Path) -> tuple[list[bytes], list[float], list[int]]:
    lines: list[bytes] = []
    stamps: list[float] = []
    nos: list[int] = []
    for block, st_, no in read_unwrapped(path, ReadStats()):
        got = block.split(b"\n")[:-1]
        lines += got
        stamps += [math.nan] * len(got) if st_ is None else st_.tolist()
        nos += list(range(len(nos) + 1, len(nos) + 1 + len(got))) if no is None else no.tolist()
    return lines, stamps, nos


TRACE = [b"[rank3]: Traceback (most recent call last):",
         b'[rank3]:   File "train.py", line 12, in <module>',
         b"  File \"/x/y.py\", line 3, in f",
         b"RuntimeError: CUDA error: an illegal memory access was encountered <&>"]


@pytest.mark.parametrize("kind", ["cri", "docker", "kubectl", "elastic", "journald"])
def test_each_runtime_format_is_recognised_and_unwrapped_with_its_times(tmp_path, kind):
    p = tmp_path / "n.log"
    times = [T0 + k * 1_500_000_000 for k in range(len(TRACE))]
    p.write_bytes(_wrap(kind, TRACE, times))
    lines, stamps, nos = _read(p)
    assert lines == TRACE
    assert nos == [1, 2, 3, 4]
    assert stamps == pytest.approx([t / 1e9 for t in times], abs=1e-6)


def test_a_framework_that_stamps_its_own_lines_is_left_as_it_printed_them(tmp_path):
    # its logger leads with an ISO time, but a traceback's lines are bare: not a wrapper
    text = (b"2025-04-18T10:00:00.123Z INFO step 1\n" * 5
            + b"Traceback (most recent call last):\n  File \"a.py\", line 1\n"
            + b"2025-04-18T10:00:05.123Z INFO step 2\n" * 5)
    assert sniff(text) is None
    # ... and where all its first lines lead with one, it prints milli- or microseconds
    assert sniff(b"2025-04-18T10:00:00.123456Z INFO step 1\n" * 30) is None
    assert sniff(b"2025-04-18T10:00:00.123456789Z INFO step 1\n" * 30) == "stamped"
    p = tmp_path / "n.log"
    p.write_bytes(text)
    lines, stamps, _ = _read(p)
    assert lines == text.split(b"\n")[:-1]
    assert all(math.isnan(s) for s in stamps)


def test_pieces_of_a_long_line_are_joined_and_numbered_by_the_first(tmp_path):
    long = b"x" * 40_000 + b" RuntimeError: tail"
    for kind in ("cri", "docker"):
        p = tmp_path / f"{kind}.log"
        data = records(kind, b"first\n", "stdout", T0) + records(kind, long + b"\n", "stderr", T0 + 10**9) \
            + records(kind, b"last\n", "stdout", T0 + 2 * 10**9)
        assert data.count(b"\n") == 5  # 16 KiB pieces: three records for the long line
        p.write_bytes(data)
        lines, stamps, nos = _read(p)
        assert [ln[:5] for ln in lines] == [b"first", b"xxxxx", b"last"]
        assert nos == [1, 2, 5]
        # joined, then cut to the reader's line limit as a bare file's line would be
        assert len(lines[1]) == 4096


def test_a_progress_bar_in_one_docker_record_ends_lines_at_its_carriage_returns(tmp_path):
    bar = "".join(f"\rTrain: {k}/50 [00:0{k % 10}<00:10, 1.00it/s]" for k in range(1, 40))
    p = tmp_path / "n.log"
    p.write_bytes(records("docker", bar.encode() + b"\n", "stderr", T0)
                  + records("docker", b"RuntimeError: boom\n", "stderr", T0 + 10**9))
    lines, _, nos = _read(p)
    assert b"Train: 39/50 [00:09<00:10, 1.00it/s]" in lines
    assert lines[-1] == b"RuntimeError: boom" and nos[-1] == 2


def test_unwrap_lines_keeps_one_line_per_file_line_for_truth_by_line_number():
    wrapped = _wrap("cri", TRACE, [T0] * len(TRACE)).decode().split("\n")[:-1]
    assert unwrap_lines(wrapped) == [t.decode() for t in TRACE]
    assert unwrap_lines(["plain", "lines", "stay"]) == ["plain", "lines", "stay"]


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                max_size=60).map(lambda s: s.encode())


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, min_size=3, max_size=40),
       st.sampled_from(["cri", "docker", "kubectl", "elastic", "journald"]),
       st.integers(min_value=1, max_value=4096))
def test_any_lines_come_back_as_written_whatever_the_block_size(tmp_path_factory, lines, kind, block):
    # a line of only spaces is blank to the sniffer; keep three that are not
    lines = [b"start a", b"start b", b"start c"] + lines
    times = [T0 + k * 1_000_001 for k in range(len(lines))]
    data = _wrap(kind, lines, times)
    kind_seen = sniff(data)
    assert kind_seen == {"kubectl": "stamped", "elastic": "json", "journald": "json"}.get(kind, kind)
    u = Unwrapper(kind_seen)
    out, stamps = b"", []
    view = data
    while view:  # whole lines per block, as l4.ingest.read_blocks yields them
        cut = view.rfind(b"\n", 0, block)
        cut = view.find(b"\n") if cut < 0 else cut
        inner, st_, _ = u.feed(view[: cut + 1])
        out += inner
        stamps += st_.tolist()
        view = view[cut + 1:]
    inner, st_, _ = u.finish()
    out += inner
    stamps += st_.tolist()
    assert out.split(b"\n")[:-1] == lines
    tol = 1e-3 if kind == "journald" else 1e-6  # journald keeps microseconds
    assert stamps == pytest.approx([t / 1e9 for t in times], abs=tol)


# --- end to end: a real torchrun job stored by a container runtime -------------------------

def _rewrap(src: Path, dst: Path, kind: str) -> None:
    """``src``'s node files as a runtime would have stored them: each line's write time is
    its own printed time, else the last one before it in the file (the runtime's clock
    never runs behind the lines it wraps)."""
    for f in src.rglob("*"):
        rel = f.relative_to(src)
        if f.is_dir():
            continue
        out = dst / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if "logs" not in rel.parts:
            out.write_bytes(f.read_bytes())
            continue
        lines = f.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        times, last = [], None
        for ln in lines:
            t = parse_ts(ln.decode("utf-8", "replace"))
            last = t if t == t and t > 1e9 else last
            times.append(last)
        first = next((t for t in times if t is not None), 1.764e9)
        ns = [int(round((t if t is not None else first) * 1e9)) + k * 1000 for k, t in enumerate(times)]
        out.write_bytes(_wrap(kind, lines, ns))


def _summary(report: dict) -> tuple:
    return (report["nodes"][0]["node"], report["stage"],
            [i["iteration"] for i in report["iterations"][:1]],
            sorted(e["template"] for e in report["events"][:5]))


@pytest.mark.parametrize("kind", ["cri", "docker", "elastic"])
def test_a_real_run_reads_the_same_wrapped_as_bare(tmp_path, kind):
    # a sigkill'd rank (real torchrun, gloo): every launcher line carries its own time, so
    # the rewrapped copy's times are the ones printed
    name = "case-0"
    assert (FIXTURES / f"{name}.tar.xz").exists()
    case, truth = unpack(name, tmp_path / "bare")
    bases = [case / b for b in truth["baselines"]]
    bare = diagnose(case / "failed", baselines=bases, store_path=False)
    wcase = tmp_path / kind / name
    _rewrap(case, wcase, kind)
    first = next((wcase / "failed" / "logs").glob("*.log")).read_bytes()[:200]
    assert first.startswith(b"{") if kind != "cri" else first[:4].isdigit()
    wrapped = diagnose(wcase / "failed", baselines=[wcase / b for b in truth["baselines"]],
                       store_path=False)
    assert _summary(wrapped) == _summary(bare)
    assert wrapped["nodes"][0]["node"] == truth["faulty_nodes"][0]
    assert wrapped["stage"] == truth["stage"]
    # the report points at the file's own lines: the wrapped line there holds the event
    shown = [ex for e in wrapped["events"][:5] for ex in e["examples"][:1]]
    assert shown
    for ex in shown:
        raw = (wcase / "failed" / ex["file"]).read_text().split("\n")[ex["line"] - 1]
        assert unwrap_lines([raw])[0][:200] == ex["text"][:200]


def _fixture(name: str) -> Path:
    return REPO / "tests" / "fixtures" / "wrapped" / f"{name}.tar.xz"


@pytest.mark.parametrize("name", ["cri-hang", "docker-truncated-ckpt"])
def test_a_real_run_stored_by_a_container_runtime_is_diagnosed(tmp_path, name):
    """Real torchrun jobs whose launchers' stdout and stderr went through pipes into a
    runtime's log format with the times the lines were read (benchmarks/realruns
    ``--runtime``): nothing here was rewritten after the run."""
    with tarfile.open(_fixture(name), "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    case = next(p for p in tmp_path.iterdir() if p.is_dir())
    truth = json.loads((case / "truth.json").read_text())
    assert truth["style"]["runtime"] in ("cri", "docker")
    report = diagnose(case / "failed", baselines=[case / b for b in truth["baselines"]],
                      store_path=False)
    assert report["nodes"][0]["node"] == truth["faulty_nodes"][0]
    assert report["stage"] == truth["stage"]
    if truth["iteration"] is not None:
        assert any(abs(i["iteration"] - truth["iteration"]) <= 1 for i in report["iterations"][:3])
    assert report["charts"]["timeline"]["clock"] == "wall"  # the runtime's times were read


def test_a_structured_loggers_fields_are_kept_and_a_collectors_metadata_is_not():
    from l4.wrapped import Unwrapper
    rows = [{"level": "info", "ts": 1744970400.25, "msg": "train step", "step": 120, "loss": 2.31},
            {"@timestamp": "2025-04-18T10:00:01Z", "message": "[rank3]: RuntimeError: boom",
             "stream": "stderr", "kubernetes": {"pod_name": "w-3"}, "_p": "F", "host": "n3"}]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    assert sniff(data) == "json"
    inner, stamps, _ = Unwrapper("json").feed(data)
    assert inner.split(b"\n")[:-1] == [b"train step level=info step=120 loss=2.31",
                                        b"[rank3]: RuntimeError: boom"]
    assert stamps.tolist() == pytest.approx([1744970400.25, 1744970401.0])
    # a training script's own JSON metrics (no message) are its lines, not a wrapper
    assert sniff(b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.9}\n{"step": 3, "loss": 1.8}\n') is None



# --- a collector's export of the whole job: one file, every node's records -------------------

def _export(job: Path, style: str, newest_first: bool = False) -> None:
    """``job``'s node files as one export of a log store, records in time order (write
    time: as in ``_rewrap``), the node in the field that store puts it in."""
    recs = []
    for f in sorted((job / "logs").glob("*.log")):
        last = None
        for k, ln in enumerate(f.read_bytes().decode("utf-8", "replace").split("\n")[:-1]):
            t = parse_ts(ln)
            last = t if t == t and t > 1e9 else last
            recs.append(((last or 1.764e9) + k * 1e-6, f.stem, ln))
        f.unlink()
    recs.sort(key=lambda r: r[0], reverse=newest_first)
    rows = []
    for t, node, ln in recs:
        stamp = rfc3339nano(int(t * 1e9))
        if style == "elastic":
            rows.append({"@timestamp": stamp, "message": ln, "stream": "stdout",
                         "kubernetes": {"pod_name": node, "namespace_name": "train"}})
        else:  # logcli --output=jsonl
            rows.append({"labels": {"pod": node, "namespace": "train"}, "line": ln, "timestamp": stamp})
    (job / "logs" / "export.log").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("style", ["elastic", "loki"])
def test_an_export_of_every_nodes_records_reads_as_the_node_files(tmp_path, style):
    import shutil

    case, truth = unpack("case-0", tmp_path / "bare")
    bases = truth["baselines"]
    bare = diagnose(case / "failed", baselines=[case / b for b in bases], store_path=False)
    moved = tmp_path / style / "case-0"
    shutil.copytree(case, moved)
    for job in [moved / "failed", *(moved / b for b in bases)]:
        _export(job, style)
    got = diagnose(moved / "failed", baselines=[moved / b for b in bases], store_path=False)
    assert sorted(n["node"] for n in got["nodes"]) == sorted(n["node"] for n in bare["nodes"])
    assert _summary(got) == _summary(bare)
    assert got["nodes"][0]["node"] == truth["faulty_nodes"][0]
    assert any("export of 3 nodes" in w for w in got["warnings"])
    # every event points at a line of the export that holds that node's record
    for e in got["events"][:5]:
        ex = e["examples"][0]
        raw = (moved / "failed" / ex["file"]).read_text().split("\n")[ex["line"] - 1]
        assert ex["text"][:100] in json.loads(raw).get("message", json.loads(raw).get("line"))


def test_an_export_written_newest_first_is_said_to_be(tmp_path):
    case, truth = unpack("case-0", tmp_path)
    _export(case / "failed", "elastic", newest_first=True)
    report = diagnose(case / "failed", store_path=False)
    assert any("newest first" in w for w in report["warnings"])


@settings(max_examples=60, deadline=None)
@given(st.lists(_TEXT, min_size=1, max_size=30), st.sampled_from(["cri", "docker"]),
       st.integers(min_value=1, max_value=9), st.integers(min_value=1, max_value=300))
def test_pieces_of_lines_join_whatever_the_block_boundaries(lines, kind, piece, block):
    import runtime

    if kind == "docker":  # a piece cut inside a UTF-8 character is not valid JSON text
        lines = [ln.decode().encode("ascii", "replace") for ln in lines]
    saved, runtime.PIECE = runtime.PIECE, piece
    try:
        data = b"".join(runtime.records(kind, ln + b"\n", "stdout", T0 + k * 10**9)
                        for k, ln in enumerate(lines))
    finally:
        runtime.PIECE = saved
    u = Unwrapper(kind)
    out, nos, stamps = b"", [], []
    view = data
    while view:
        cut = view.rfind(b"\n", 0, block)
        cut = view.find(b"\n") if cut < 0 else cut
        inner, st_, no = u.feed(view[: cut + 1])
        out, nos, stamps = out + inner, nos + no.tolist(), stamps + st_.tolist()
        view = view[cut + 1:]
    inner, st_, no = u.finish()
    out, nos, stamps = out + inner, nos + no.tolist(), stamps + st_.tolist()
    assert out.split(b"\n")[:-1] == lines
    # each line numbered by the file line its first piece is on, timed by that piece
    starts, at = [], 1
    for ln in lines:
        starts.append(at)
        at += max(1, -(-len(ln) // piece))
    assert nos == starts
    assert stamps == pytest.approx([(T0 + k * 10**9) / 1e9 for k in range(len(lines))], abs=1e-6)


def test_l4_parse_reads_a_wrapped_file_as_printed_with_its_line_numbers(tmp_path):
    from l4.parse import parse_file

    p = tmp_path / "n.log"
    p.write_bytes(records("cri", b"step 1 done\n", "stdout", T0)
                  + records("cri", b"x" * 20_000 + b"\n", "stdout", T0)  # two records
                  + records("cri", b"step 2 done\n", "stdout", T0))
    rows = list(parse_file(p, store_path=None))
    assert [r["line"] for r in rows] == [1, 2, 4]
    assert rows[0]["template_id"] == rows[2]["template_id"] and "stdout" not in rows[0]["template"]


def test_the_papers_baselines_read_a_wrapped_job_as_the_bare_one(tmp_path):
    # what an SRE's grep for errors sees in a log viewer: the lines as printed, per node
    import shutil

    from l4 import baselines as B

    case, _ = unpack("case-0", tmp_path / "bare")
    cri, export = tmp_path / "cri", tmp_path / "export"
    _rewrap(case / "failed", cri, "cri")
    shutil.copytree(case / "failed", export)
    _export(export, "elastic")
    for job in (cri, export):
        assert B.error_count_ranking(job) == B.error_count_ranking(case / "failed")
        # (Error_time dates lines by their write time here, by the last printed time there)
        assert sorted(B.error_time_ranking(job)) == sorted(B.error_time_ranking(case / "failed"))
        got = [(e["template"], e["count"], e["nodes"]) for e in B.error_level_events(job)]
        assert got == [(e["template"], e["count"], e["nodes"])
                       for e in B.error_level_events(case / "failed")]
