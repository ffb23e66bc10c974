"""Logs from launchers that gather other processes' output, and words any job prints.

Why: on logs l4's authors did not write (a clean-room generator's SageMaker, SkyPilot and
Ray styles; real torchrun runs with a mistyped master address) the engine misread three
things that no framework profile can fix:

* a process gatherer's origin tag ("(worker2, rank=2, pid=356686, ip=10.0.0.3) ",
  "[1,mpirank:22,algo-6]<stderr>:") in front of every line hid tracebacks (each frame read
  as an event of its own) and made every relayed line look like the gatherer's own;
* when one process writes every node's lines (mpirun on SageMaker), the origin's own file
  holds almost nothing: the relayed lines are its evidence, not the gatherer's;
* getaddrinfo's "Name or service not known" names a cause (a host name that does not
  resolve), and a store client's "Did the remote server shutdown or crash?" is an echo.
"""

from __future__ import annotations

import pytest

from conftest import write_job
from l4.engine import diagnose
from l4.mask import is_continuation, strip_prefix
from l4.profiles import load_profiles
from l4.severity import is_symptom, severity


@pytest.mark.parametrize("tag", [
    "(worker2, rank=2, pid=356686, ip=10.239.77.30) ",
    "(WorkerDict pid=3182044, ip=192.168.54.27) ",
    "(head, rank=0, pid=75235) ",
    "[1,mpirank:22,algo-6]<stderr>:",
])
def test_an_origin_tag_is_a_prefix_and_keeps_tracebacks_together(tag: str) -> None:
    frame = '  File "/home/sky/sky_workdir/train.py", line 388, in main'
    assert strip_prefix(tag + "RuntimeError: CUDA error: uncorrectable ECC error encountered") == (
        "RuntimeError: CUDA error: uncorrectable ECC error encountered")
    assert is_continuation(tag + frame)
    assert not is_continuation(tag + "Traceback (most recent call last):")


def test_a_parenthesis_without_a_pid_is_the_message() -> None:
    line = "(note) checkpoint saved"
    assert strip_prefix(line) == line


def test_a_name_that_does_not_resolve_is_a_cause_and_a_vanished_store_an_echo() -> None:
    dns = ("[W1205 04:06:22.118648623 socket.cpp:764] [c10d] The IPv6 network addresses of "
           "(trn-70-, 38495) cannot be retrieved (gai error: -2 - Name or service not known).")
    routine = "[W1205 04:06:22.118 socket.cpp:764] [c10d] The client socket has connected to node0"
    assert severity(dns) > severity(routine)
    assert severity("socket.gaierror: [Errno -3] Temporary failure in name resolution") == 1.0
    assert not is_symptom(dns)
    for echo in ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was "
                 "likely closed. Did the remote server shutdown or crash?",
                 "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                 "connection to the C10d store has failed. See inner exception for details."):
        assert is_symptom(echo)


@pytest.mark.parametrize(("frame", "stage"), [
    ('  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 1880 '
     "in destroy_process_group", "finalization"),
    ("    dist.destroy_process_group()", "finalization"),
    ('  File "/usr/lib/python3/site-packages/transformers/trainer.py", line 3410, in save_model',
     "checkpointing"),
    ("    serialize_file(_flatten(tensors), filename, metadata=metadata)", None),
    ("    save_file(tensors, filename)", "checkpointing"),
    ("    ctx.save_for_backward(x, weight)", None),
    # torch's warning in a crashed job names no phase
    ("WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal "
     "program exit, the application should call destroy_process_group to ensure that any pending "
     "NCCL operations have finished in this process.", None),
])
def test_a_frame_names_the_phase_it_ran_in(frame: str, stage: str | None) -> None:
    assert load_profiles()["generic"].hint_of(frame) == stage


def _tagged(rank: int, host: str, text: str) -> str:
    return f"[1,mpirank:{rank},{host}]<stdout>:{text}"


def _gathered_job(n_steps: int, *, fail: tuple[int, str] | None) -> dict[str, str]:
    """A SageMaker-style MPI job: the first host's log holds every rank's tagged lines, the
    other hosts' logs only their own toolkit lines."""
    hosts = [f"algo-{k}" for k in range(1, 6)]
    main = ["2025-06-03 16:37:15,638 sagemaker-training-toolkit INFO     Starting MPI run as master node."]
    for step in range(1, n_steps + 1):
        for r, h in enumerate(hosts):
            main.append(_tagged(r, h, f"[2025-06-03 16:{38 + step // 60:02d}:{step % 60:02d}] step {step} "
                                      f"loss {2.0 - step / 100:.3f}"))
        if fail is not None and step == fail[0]:
            bad = fail[1]
            r = hosts.index(bad)
            main += [_tagged(r, bad, "Traceback (most recent call last):"),
                     _tagged(r, bad, '  File "/opt/ml/code/train.py", line 19, in main'),
                     _tagged(r, bad, "    loss = train_step(model, batch)"),
                     _tagged(r, bad, "RuntimeError: CUDA error: uncorrectable ECC error encountered")]
            for k, h in enumerate(hosts):
                if h != bad:
                    main.append(_tagged(k, h, f"[rank{k}]:[E ProcessGroupNCCL.cpp:1592] [PG 0 Rank {k}] "
                                              "Watchdog caught collective operation timeout: "
                                              "WorkNCCL(SeqNum=88, OpType=ALLREDUCE) ran for 600000 "
                                              "milliseconds before timing out."))
            main.append("mpirun.real detected that one or more processes exited with non-zero status")
            break
    logs = {hosts[0]: "\n".join(main) + "\n"}
    for h in hosts[1:]:
        logs[h] = ("2025-06-03 16:37:04,004 sagemaker-training-toolkit INFO     Starting MPI run as worker node.\n"
                   "2025-06-03 16:37:10,004 sagemaker-training-toolkit INFO     Waiting for MPI process to finish.\n")
    return logs


def test_a_node_whose_lines_another_node_gathered_is_the_culprit(tmp_path) -> None:
    base = write_job(tmp_path / "ok", _gathered_job(30, fail=None), status="succeeded")
    failed = write_job(tmp_path / "failed", _gathered_job(30, fail=(21, "algo-4")))
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "algo-4"
    # the gatherer printed the lines; it is not the culprit for that
    assert report["nodes"][0]["node"] != "algo-1"


def _sky_node(k: int, steps: int, *, dies_at: int | None = None, names: str | None = None) -> str:
    """A SkyPilot-style node log: every line behind the node's own origin tag."""
    tag = f"(worker{k}, rank={k}, pid={4000 + k}, ip=10.1.0.{20 + k}) "
    out = [f"{tag}node_rank={k} head_ip=10.1.0.20 num_nodes=4"]
    for s in range(1, steps + 1):
        if dies_at is not None and s == dies_at:
            return "\n".join(out) + "\n"  # power lost: the log just stops
        out.append(f"{tag}[2025-01-01 10:{s // 60:02d}:{s % 60:02d}] iter {s}: loss {3 - s / 50:.4f}")
    if names is not None:
        out += [f"{tag}node{k}:5{k}1:5{k}9 [0] misc/socket.cc:49 NCCL WARN socketProgressOpt: Call to recv "
                f"from {names}<47601> failed : Connection reset by peer",
                f"{tag}[rank{k}]:[E ProcessGroupNCCL.cpp:916] [Rank {k}] NCCL watchdog thread terminated "
                "with exception: NCCL error: remote process exited or there was a network error",
                f"{tag}ncclRemoteError: A call failed possibly due to a network error or a remote process "
                "exiting prematurely."]
    return "\n".join(out) + "\n"


def test_a_node_tagging_its_own_lines_can_be_named_by_its_address(tmp_path) -> None:
    """Every line of a SkyPilot node's log carries its own address in the origin tag: that
    is the node itself, not a relay, so peers that name the address name the node."""
    base = write_job(tmp_path / "ok", {f"sky-w{k}": _sky_node(k, 40) for k in range(4)}, status="succeeded")
    nodes = {f"sky-w{k}": _sky_node(k, 25, names="10.1.0.22") for k in (0, 1, 3)}
    nodes["sky-w2"] = _sky_node(2, 40, dies_at=23)
    failed = write_job(tmp_path / "failed", nodes)
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "sky-w2"
    assert report["nodes"][0]["evidence"]["named_by_peers"] > 0


# --- one file that holds every node's lines is split by origin (l4.gather) ----------------


def test_a_gatherers_file_is_read_as_each_origins_own(tmp_path) -> None:
    """The gatherer's tagged lines become their origin's stream; the examples still point
    at the gatherer's file, at the line that holds them."""
    from l4.ingest import discover

    failed = write_job(tmp_path / "failed", _gathered_job(30, fail=(21, "algo-4")))
    spec = discover(failed)
    shares = {nf.node for nf in spec.files if nf.origin}
    assert shares == {"algo-2", "algo-3", "algo-4", "algo-5"}
    gatherer = next(nf for nf in spec.files if nf.routed)
    assert gatherer.node == "algo-1" and set(gatherer.routed) == shares
    assert any("holds the tagged output of 4 other node(s)" in w for w in spec.warnings)

    base = write_job(tmp_path / "ok", _gathered_job(30, fail=None), status="succeeded")
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "algo-4"
    assert report["stage"] == "training"
    assert 21 in [it["iteration"] for it in report["iterations"][:3]]
    lines = (failed / "logs" / "algo-1.log").read_text().splitlines()
    seen = 0
    for ev in report["events"]:
        for ex in ev["examples"]:
            if ex["node"] == "algo-4" and "ECC" in ex["text"]:
                assert ex["file"] == "logs/algo-1.log"
                assert lines[ex["line"] - 1] == ex["text"]
                seen += 1
    assert seen
    onset = report["onset"]
    assert onset["node"] == "algo-4" and onset["file"] == "logs/algo-1.log"
    assert "algo-4" in lines[onset["line"] - 1]


def test_a_plain_job_is_not_split(tmp_path) -> None:
    """Tags that name no other node of the job ("[2025-06-03 ...]", "[rank3]:") split nothing."""
    from l4.ingest import discover

    nodes = {f"node{k}": "".join(f"[2025-06-03 16:38:{s:02d}] [rank{k}]: step {s} loss 1.0\n"
                                 for s in range(40)) for k in range(3)}
    spec = discover(write_job(tmp_path / "job", nodes))
    assert not any(nf.origin or nf.routed for nf in spec.files)
    assert len(spec.files) == 3


def _rank0_only_job(fail: bool) -> dict[str, str]:
    """mpirun on SageMaker as Hugging Face's Trainer prints: rank 0 alone reports progress
    (untimed loss lines and a timed save every 10 steps), the other ranks print nothing
    while they train; the launcher's own lines carry no tag."""
    hosts = [f"algo-{k}" for k in range(1, 5)]
    main = [f"2025-06-03 16:37:{k:02d},000 sagemaker-training-toolkit INFO     Waiting for host "
            f"{h} to be reachable" for k, h in enumerate(hosts[1:], start=10)]
    main += [_tagged(r, h, "[INFO|modeling_utils.py:3553] 2025-06-03 16:37:30,520 >> loading weights file "
                           "/mnt/model.safetensors") for r, h in enumerate(hosts)]
    for step in range(1, 61):
        main.append(_tagged(0, hosts[0], f"{{'loss': {2.0 - step / 100:.4f}, 'grad_norm': 0.5, 'step': {step}}}"))
        if step % 10 == 0:
            main.append(_tagged(0, hosts[0], f"[INFO|trainer.py:3503] 2025-06-03 16:{40 + step // 10:02d}:00,000 "
                                             f">> Saving model checkpoint to /opt/ml/checkpoints/checkpoint-{step}"))
        if fail and step == 43:
            main += [_tagged(2, "algo-3", "Traceback (most recent call last):"),
                     _tagged(2, "algo-3", '  File "/opt/ml/code/train.py", line 19, in main'),
                     _tagged(2, "algo-3", "    tr_loss_step = self.training_step(model, inputs)"),
                     _tagged(2, "algo-3", "IndexError: index out of range in self"),
                     "mpirun.real detected that one or more processes exited with non-zero status",
                     "2025-06-03 16:45:10,000 sagemaker-training-toolkit ERROR    Reporting training FAILURE"]
            break
    else:
        main.append("2025-06-03 16:47:00,000 sagemaker-training-toolkit INFO     Reporting training SUCCESS")
    logs = {hosts[0]: "\n".join(main) + "\n"}
    end = "16:45:11" if fail else "16:47:01"  # mpirun stops every host's daemon at the end
    for h in hosts[1:]:
        logs[h] = ("2025-06-03 16:37:04,004 sagemaker-training-toolkit INFO     Starting MPI run as worker node.\n"
                   "2025-06-03 16:37:10,004 sagemaker-training-toolkit INFO     Waiting for MPI process to finish.\n"
                   f"2025-06-03 {end},000 sagemaker-training-toolkit INFO     Orted process exited\n")
    return logs


def test_a_rank_that_prints_no_progress_fails_in_training_when_the_gatherer_says_so(tmp_path) -> None:
    """The culprit's share holds its start-up lines and its traceback, nothing else: the
    gatherer's order (its clock) and rank 0's steps place the failure in training.  The
    launcher calling the roll of its hosts ("Waiting for host algo-3") counts no steps, and
    its own untagged report of the failure is no sign of guilt."""
    base = write_job(tmp_path / "ok", _rank0_only_job(False), status="succeeded")
    failed = write_job(tmp_path / "failed", _rank0_only_job(True))
    report = diagnose(failed, baselines=[base], store_path=False)
    assert report["nodes"][0]["node"] == "algo-3"
    assert report["stage"] == "training"
    assert "Waiting for host" not in (report.get("iteration_marker") or "")
    its = [it["iteration"] for it in report["iterations"][:3]]
    assert any(abs(it - 44) <= 1 for it in its), its


@pytest.mark.parametrize("line", [
    "2025-01-30 18:53:46,706 sagemaker-training-toolkit INFO     Orted process exited",
    "[INFO] worker group exited",
    "I1205 04:06:22.118648 1234 socket.cpp:764] connection refused, retrying",
])
def test_a_line_logged_at_info_level_is_routine(line: str) -> None:
    """The program's own level says it is routine: a worker host's launcher reporting its
    daemon's exit (every host prints it as mpirun stops) is no sign of its guilt; the same
    words at ERROR level, or an exception, still are."""
    assert severity(line) < 0.3
    assert severity(line.replace("INFO", "ERROR").replace("I1205", "E1205")) >= 0.6
    assert severity("RuntimeError: the worker process exited") >= 0.6
