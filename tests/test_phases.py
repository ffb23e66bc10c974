"""Stage and iteration from what healthy runs printed, on a log format no profile knows."""

from __future__ import annotations

from pathlib import Path

from conftest import write_job
from l4 import engine
from l4.engine import diagnose
from l4.ingest import discover
from l4.phases import END, LOOP_PHASE, STARTUP, learn_timeline
from l4.templates import open_store

# wording of a home-grown training script: the rules name "validation" evaluation, and
# nothing in it says "iteration" or "step"
STARTUP_LINES = [
    "[{t}] world_size=8 backend=gloo rank={r}",
    "[{t}] Loading dataset from /data/corpus",
    "[{t}] validation split: 0.1 of the corpus held back",
    "[{t}] loading model from /ckpt/base",
    "[{t}] pulling tensors from the object store",
]


def node_log(rank: int, n_batches: int, *, fail: str | None = None, fail_at: int | None = None,
             stop_startup: int | None = None, victim: bool = False) -> str:
    out = []
    sec = 0

    def t() -> str:
        nonlocal sec
        sec += 1
        return f"2025-03-02 10:{sec // 60:02d}:{sec % 60:02d}"

    for k, line in enumerate(STARTUP_LINES):
        if stop_startup is not None and k == stop_startup:
            out.append(f"[{t()}] {fail}")
            return "\n".join(out) + "\n"
        out.append(line.format(t=t(), r=rank))
    for b in range(1, n_batches + 1):
        if fail_at is not None and b == fail_at:
            if fail:
                out.append(f"[{t()}] {fail}")
            if victim:
                out.append(f"[{t()}] RuntimeError: Connection closed by peer [10.0.0.{rank}]:5000")
            return "\n".join(out) + "\n"
        out.append(f"[{t()}] [Epoch 1][Batch {b}] loss={2.0 + 1.0 / b:.4f} lr=0.0001")
    out.append(f"[{t()}] all done, wrote /ckpt/final")
    return "\n".join(out) + "\n"


def healthy(root: Path, n: int, batches: int = 40) -> Path:
    return write_job(root, {f"h{r}": node_log(r, batches) for r in range(n)}, status="succeeded")


def _parsed(path: Path):
    spec = discover(path)
    scans = engine.scan_files(list(spec.files), 1)
    with open_store(None) as store:
        return engine.parse_job(spec, scans, store)


def test_timeline_learns_phases_and_names_from_healthy_runs(tmp_path):
    tl = learn_timeline([_parsed(healthy(tmp_path / "b0", 3)), _parsed(healthy(tmp_path / "b1", 2))])
    assert tl is not None and tl.jobs == 2
    by_text = {tl.templates[c]: c for c in tl.phase}
    val = next(c for t, c in by_text.items() if "validation split" in t)
    assert tl.phase[val] == STARTUP and tl.stage[val] == "data_loading"
    pull = next(c for t, c in by_text.items() if "pulling tensors" in t)
    assert tl.stage[pull] == "model_loading"
    batch = next(c for t, c in by_text.items() if "[Epoch" in t)
    assert tl.phase[batch] == LOOP_PHASE and tl.stage[batch] == "training"
    done = next(c for t, c in by_text.items() if "all done" in t)
    assert tl.phase[done] == END and tl.stage[done] == "finalization"
    # places follow the healthy order
    places = [tl.place[by_text[t]] for t in by_text if by_text[t] in tl.place]
    assert places == sorted(places)


def test_start_up_failure_is_placed_by_the_healthy_order(tmp_path):
    """The culprit fails right after the line the rules call "evaluation"; healthy runs
    show it is part of loading data."""
    nodes = {f"n{r}": node_log(r, 0, stop_startup=len(STARTUP_LINES) - 1,
                               fail="torch.distributed.DistStoreError: wait timeout after 30000ms")
             for r in (0, 1, 3)}
    nodes["n2"] = node_log(2, 0, fail="ValueError: corrupt record 17 in shard 3", stop_startup=3)
    failed = write_job(tmp_path / "failed", nodes)
    bases = [healthy(tmp_path / "b0", 4), healthy(tmp_path / "b1", 3)]
    report = diagnose(failed, bases, store_path=False)
    assert report["nodes"][0]["node"] == "n2"
    assert report["stage"] == "data_loading"
    assert report["iterations"] == []


def test_counter_in_an_unknown_format_makes_a_training_failure(tmp_path):
    """A DataLoader worker killed mid-training: the counter ("[Batch 120]") is what says the
    job was training, though no rule calls its line a training line."""
    nodes = {f"n{r}": node_log(r, 60, fail_at=33, victim=True) for r in range(4)}
    nodes["n1"] = node_log(1, 60, fail_at=33,
                           fail="RuntimeError: DataLoader worker (pid 4711) is killed by signal: Killed.")
    failed = write_job(tmp_path / "failed", nodes)
    report = diagnose(failed, [healthy(tmp_path / "b0", 4, 60)], store_path=False)
    assert report["nodes"][0]["node"] == "n1"
    assert report["stage"] == "training"
    assert 33 in [it["iteration"] for it in report["iterations"][:3]]
    # the same without any healthy reference: the counter alone decides
    alone = diagnose(failed, store_path=False)
    assert alone["stage"] == "training"


def test_a_stored_normal_pool_teaches_the_timeline(tmp_path):
    """Healthy runs learnt with ``l4 learn`` into the knowledge base place a failure as
    baselines on the command line do: the pool keeps each event's phase and place."""
    from l4.kbstore import load_normal_rows
    from l4.pipeline import diagnose_and_record, learn_normal

    kb = tmp_path / "kb.duckdb"
    for i, n in enumerate((4, 3)):
        learn_normal(healthy(tmp_path / f"b{i}", n), kb=kb)
    rows = load_normal_rows("cfg-a", kb=kb)
    assert any(r["phase"] == STARTUP and r["stage"] == "data_loading"
               and "validation split" in r["template"] for r in rows)
    assert any(r["counter"] for r in rows)
    nodes = {f"n{r}": node_log(r, 0, stop_startup=len(STARTUP_LINES) - 1,
                               fail="torch.distributed.DistStoreError: wait timeout after 30000ms")
             for r in (0, 1, 3)}
    nodes["n2"] = node_log(2, 0, fail="ValueError: corrupt record 17 in shard 3", stop_startup=3)
    failed = write_job(tmp_path / "failed", nodes)
    report = diagnose_and_record(failed, [], kb=kb)
    assert report["baseline"]["pool"] is True
    assert report["nodes"][0]["node"] == "n2"
    assert report["stage"] == "data_loading"


def saver_log(rank: int, n_batches: int, *, every: int = 10, fail_at: int | None = None,
              fail: str | None = None, closes: bool = True, prints_batches: bool = True) -> str:
    """A node of a job whose first rank announces saves and ends each with a line no rule
    knows ("write finished ..."); ``prints_batches`` False for the announcing rank, which
    prints no counter (as Megatron's first rank).  Batch ``b`` ends at second ``20 + 3b``."""
    def t(sec: int) -> str:
        return f"2025-03-02 10:{sec // 60:02d}:{sec % 60:02d}"

    out = [line.format(t=t(2 * k), r=rank) for k, line in enumerate(STARTUP_LINES)]
    for b in range(1, n_batches + 1):
        sec = 20 + 3 * b
        if fail_at is not None and b == fail_at:
            out.append(f"[{t(sec)}] {fail or 'RuntimeError: Connection closed by peer'}")
            return "\n".join(out) + "\n"
        if prints_batches:
            out.append(f"[{t(sec)}] [Epoch 1][Batch {b}] loss={2.0 + 1.0 / b:.4f} lr=0.0001")
        if rank == 0 and b % every == 0:
            out.append(f"[{t(sec)}] saving checkpoint to /ckpt/run7/step_{b}")
            if closes:
                out.append(f"[{t(sec + 1)}] write finished in 1.1 s")
    out.append(f"[{t(20 + 3 * n_batches + 2)}] all done, wrote /ckpt/final")
    return "\n".join(out) + "\n"


def _saver_job(root: Path, n_batches: int, fail_at: int | None = None, fail: str | None = None,
               closes: bool = True, culprit: str = "n0") -> Path:
    """Node ``culprit`` fails with ``fail`` at batch ``fail_at``; the others lose their
    connection to it."""
    nodes = {}
    for r in range(4):
        name = f"n{r}"
        nodes[name] = saver_log(r, n_batches, fail_at=fail_at, prints_batches=r != 0,
                                closes=closes, fail=fail if name == culprit else None)
    return write_job(root, nodes, status="failed" if fail_at else "succeeded")


CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"


def test_the_line_that_ends_a_save_is_learned_from_healthy_runs(tmp_path):
    """The first rank, which prints no counter, announced a save at batch 20 and ended it
    with a line no rule knows; its GPU failed at batch 23.  Healthy runs show that line
    follows every announcement: the save was over, the job was training."""
    bases = [_saver_job(tmp_path / "b0", 40), _saver_job(tmp_path / "b1", 40)]
    tl = learn_timeline([_parsed(b) for b in bases])
    ann = next(c for c, t in tl.templates.items() if "saving checkpoint" in t)
    assert [tl.templates[c] for c in tl.closers[ann]] == ["write finished in <DUR>"]
    failed = _saver_job(tmp_path / "failed", 40, fail_at=23, fail=CUDA_ERROR)
    report = diagnose(failed, bases, store_path=False)
    assert report["nodes"][0]["node"] == "n0"
    assert report["stage"] == "training"
    assert 23 in [it["iteration"] for it in report["iterations"][:3]]


def test_a_save_that_never_ended_is_the_stage(tmp_path):
    """The same job, but the save at batch 20 never printed its end and no batch followed:
    the failure happened while saving."""
    bases = [_saver_job(tmp_path / "b0", 40), _saver_job(tmp_path / "b1", 40)]
    nodes = {"n0": saver_log(0, 40, prints_batches=False, closes=False, fail_at=21,
                             fail="OSError: [Errno 5] Input/output error: '/ckpt/run7/step_20'")}
    for r in (1, 2, 3):
        nodes[f"n{r}"] = saver_log(r, 40, fail_at=21)
    failed = write_job(tmp_path / "failed", nodes)
    report = diagnose(failed, bases, store_path=False)
    assert report["nodes"][0]["node"] == "n0"
    assert report["stage"] == "checkpointing"


def test_a_save_the_counter_went_past_was_over(tmp_path):
    """Without any healthy run: saves have no known end line, but the counter advanced
    seven more batches after the last one (at batch 30), so the job was training again."""
    failed = _saver_job(tmp_path / "failed", 40, fail_at=38, closes=False, fail=CUDA_ERROR)
    report = diagnose(failed, store_path=False)
    assert report["nodes"][0]["node"] == "n0"
    assert report["stage"] == "training"


def titan_log(rank: int, n_steps: int, *, last: bool, fail_at: int | None = None) -> str:
    """A job whose profile's iteration words ("step: ... loss") only appear on its
    evaluation lines (every 10 steps, all nodes), while the step counter is another line
    ("global_step=N, ...") that only the last node prints."""
    out = [f"I0301 10:00:{rank:02d}.000000 100 train.py:10] Building model on rank {rank}"]
    for s in range(1, n_steps + 1):
        sec = 10 + 2 * s
        ts = f"I0301 10:{sec // 60:02d}:{sec % 60:02d}.000000 100"
        if fail_at is not None and s == fail_at:
            msg = ("RuntimeError: CUDA error: an illegal memory access was encountered" if last
                   else "RuntimeError: NCCL communicator was aborted on rank 3")
            out.append(f"{ts} train.py:99] {msg}")
            break
        if last:
            out.append(f"{ts} train.py:214] global_step={s}, loss={2 + 1 / s:.4f}, step_time=2.0")
        if s % 10 == 0:
            out.append(f"{ts} train.py:554] validate step: {s}  loss: {2 + 1 / s:.4f}  memory: 33.6GiB(32.7%)")
    return "\n".join(out) + "\n"


def test_a_line_that_samples_the_counter_is_not_the_counter(tmp_path):
    """The profile's words name the evaluation line an iteration line; the line that
    counted every step, ten times as many, is the counter: the failure is at step 57."""
    nodes = {f"n{r}": titan_log(r, 80, last=r == 3, fail_at=57) for r in range(4)}
    failed = write_job(tmp_path / "failed", nodes, framework="torchtitan")
    report = diagnose(failed, store_path=False)
    assert "global_step" in report["iteration_marker"]
    assert report["nodes"][0]["node"] == "n3"
    assert 57 in [it["iteration"] for it in report["iterations"][:3]]


def test_a_line_healthy_runs_print_late_does_not_leap_the_frontier() -> None:
    """A timing table's header ("(min, max) time across ranks (ms):") that healthy runs
    first printed near the end of their start-up, printed by this node right after loading
    its checkpoint, does not say it got to the end: it leaps over much more of the healthy
    start-up than the steps between any of the node's other lines.  Without enough steps
    of its own to know what is usual, a node's furthest line stands."""
    from l4.phases import Timeline

    tl = Timeline(place={k: 0.05 * k for k in range(1, 11)} | {99: 0.99})
    assert tl._frontier([1, 2, 3, 4, 5, 6, 99]) == 6
    assert tl._frontier([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) == 10
    assert tl._frontier([2, 4, 99]) == 99  # too few steps to know its usual one
    # lines out of the healthy order, or one gap in what it printed, are no leap
    assert tl._frontier([1, 3, 2, 4, 5, 6, 8, 7]) == 8
    assert tl._frontier([1, 2, 3, 6, 7, 8, 9, 10]) == 10
