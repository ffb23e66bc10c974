"""Routine lines that say what went wrong: a word only the culprit names, a report's fields.

Why: a node set up unlike the others says so in a line that reads as routine (NCCL on
one node "Using [0]docker0:172.17.0.1" where every other node and every healthy run
uses ib0), and ``kubectl describe`` states a pod's end in aligned fields under its status
("      Reason:       OOMKilled").  l4 reported neither: the first has no error word and
no count out of line, the second was folded into the line above as if it were a
traceback's code line.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from conftest import write_job
from l4.engine import diagnose
from l4.mask import is_continuation

HOSTS = ["gpu-node-296", "gpu-node-297", "gpu-node-298", "gpu-node-299", "gpu-node-300"]


def node_log(host: str, k: int, *, iface: str = "ib0", role: str = "worker", steps: int = 30,
             crash: bool = False, timeout: bool = False) -> str:
    out = [f"[default0]:{host}:1824{k}:1824{k} [0] NCCL INFO Bootstrap : Using {iface}:10.1.0.{k}<0>",
           f"[default0]:{host}:1824{k}:1824{k} [0] NCCL INFO NET/Socket : Using [0]{iface}:10.1.0.{k}<0>",
           f"[default0]:{host}:1824{k}:1824{k} [0] NCCL INFO cudaDriverVersion 12020",
           f"[default0]: role of this launcher: {role}"]
    for s in range(1, steps + 1):
        out.append(f"[default0]: step {s} loss {2.0 - s / 100:.3f}")
    if crash:
        out += ["[default0]: Traceback (most recent call last):",
                '[default0]:   File "/opt/train.py", line 88, in <module>',
                "[default0]: RuntimeError: NCCL error: unhandled system error"]
    if timeout:
        out.append("[default0]: torch.distributed.DistBackendError: NCCL error in: "
                   "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error")
    return "\n".join(out) + "\n"


def healthy(root: Path) -> Path:
    return write_job(root, {h: node_log(h, k, role="master" if k == 0 else "worker")
                            for k, h in enumerate(HOSTS)}, status="succeeded", job_id="ok")


def test_the_one_node_that_names_another_interface_is_shown(tmp_path: Path) -> None:
    nodes = {h: node_log(h, k, role="master" if k == 0 else "worker", steps=20, timeout=True)
             for k, h in enumerate(HOSTS)}
    nodes["gpu-node-299"] = node_log("gpu-node-299", 3, iface="docker0", steps=20, crash=True)
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy(tmp_path / "ok")],
                      store_path=False)
    assert report["nodes"][0]["node"] == "gpu-node-299"
    named = [e for e in report["events"] if "Using" in e["template"]]
    assert named and all(e["nodes"] == ["gpu-node-299"] for e in named)
    assert any("docker0" in x["text"] for e in named for x in e["examples"])
    # the one "master" every job has is no finding: the healthy runs have it too
    assert not [e for e in report["events"] if "role of this launcher" in e["template"]]


def test_without_healthy_runs_a_lone_word_is_no_finding(tmp_path: Path) -> None:
    nodes = {h: node_log(h, k, steps=20, timeout=True) for k, h in enumerate(HOSTS)}
    nodes["gpu-node-299"] = node_log("gpu-node-299", 3, iface="docker0", steps=20, crash=True)
    report = diagnose(write_job(tmp_path / "failed", nodes), store_path=False)
    assert not [e for e in report["events"] if "Using" in e["template"]]


def test_aligned_fields_of_a_report_are_records() -> None:
    assert not is_continuation("      Reason:       OOMKilled")
    assert not is_continuation("      Exit Code:    137")
    # a traceback's code lines stay its context
    assert is_continuation("    loss = model(batch)")
    assert is_continuation('    raise ValueError(f"bad: {x}")')
    assert is_continuation("    return {'a': 1}")


def test_a_pods_end_is_reported_by_its_reason(tmp_path: Path) -> None:
    describe = ("==== pod trainer-worker-2 (namespace ml) ====\nStatus:         Failed\n"
                "    State:          Terminated\n      Reason:       OOMKilled\n"
                "      Exit Code:    137\n")
    nodes = {h: node_log(h, k, steps=20, timeout=k != 2) for k, h in enumerate(HOSTS)}
    nodes["gpu-node-298"] = node_log("gpu-node-298", 2, steps=20) + describe
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy(tmp_path / "ok")],
                      store_path=False)
    assert report["nodes"][0]["node"] == "gpu-node-298"
    assert "Reason: OOMKilled" in [e["template"] for e in report["events"]]


def test_the_node_set_up_apart_is_the_culprit_when_all_else_is_alike(tmp_path: Path) -> None:
    """Every node prints the same error; only one says, in a routine line, that it talks
    over another interface: that node is the one to look at."""
    nodes = {h: node_log(h, k, role="master" if k == 0 else "worker", steps=20, timeout=True)
             for k, h in enumerate(HOSTS)}
    nodes["gpu-node-299"] = node_log("gpu-node-299", 3, iface="docker0", steps=20, timeout=True)
    report = diagnose(write_job(tmp_path / "failed", nodes), [healthy(tmp_path / "ok")],
                      store_path=False)
    first = report["nodes"][0]
    assert first["node"] == "gpu-node-299"
    assert first["evidence"]["set_up_apart"] == 1.0
    assert all(n["evidence"]["set_up_apart"] == 0.0 for n in report["nodes"][1:])


@given(host=st.from_regex(r"[a-z]{3,8}-?[0-9]{1,3}(\.cluster)?", fullmatch=True),
       text=st.text(alphabet=st.characters(codec="utf-8"), max_size=80))
def test_a_nodes_own_name_is_never_a_word_it_names(host: str, text: str) -> None:
    """Whatever the line and the host name, the words of the host's own name never count
    as something it names: every node prints its own name, so each would stand apart."""
    from l4.oddwords import words_of

    got = words_of(f"{text} {host}:18247:18247 [0] NCCL INFO Using eth0", host)
    assert got <= words_of(text, host) | {"NCCL", "INFO", "Using", "eth"}
