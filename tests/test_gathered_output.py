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
