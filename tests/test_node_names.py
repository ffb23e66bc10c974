"""Node ids from how logs were collected: the file name, else the directory that holds it.

Why: the node id is what the report names and what peers' messages are matched against
("who names whom").  Collected from a cluster, every node's file can have the same name:
the kubelet stores a container's log as ``<ns>_<pod>_<uid>/<container>/0.log``, and a
per-node copy as ``node3/train.log``.  Named by the file, the nodes were ``0``,
``0@logs/...``; now the pod, or the directory, names them.
"""

from __future__ import annotations

from l4.ingest import discover


def test_pod_log_directories_name_their_nodes(tmp_path):
    # /var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log, copied as the job's logs
    for k in range(3):
        d = tmp_path / "job" / "logs" / f"train_llama-ft-worker-{k}_0d1c2b3a-1111-2222-3333-44445555666{k}" / "trainer"
        d.mkdir(parents=True)
        (d / "0.log").write_bytes(b"2025-04-18T10:00:00.5Z stdout F step 1\n")
    (tmp_path / "job" / "logs" / "7.log").write_text("a node named by its index\n")
    nodes = sorted(f.node for f in discover(tmp_path / "job").files)
    assert nodes == ["7", "llama-ft-worker-0", "llama-ft-worker-1", "llama-ft-worker-2"]


def test_per_node_directories_name_their_nodes_when_the_files_share_a_name(tmp_path):
    for k in range(3):
        d = tmp_path / "job" / "logs" / f"gpu-a1{k}"
        d.mkdir(parents=True)
        (d / "train.log").write_text(f"rank {k} step 1\n")
    (tmp_path / "job" / "logs" / "gpu-a10" / "dmesg.log").write_text("kernel line\n")
    files = discover(tmp_path / "job").files
    # the node's other file in its directory is the node's too
    assert sorted(f.node for f in files) == ["gpu-a10", "gpu-a10", "gpu-a11", "gpu-a12"]
    # per-rank files under a node's directory are that node's
    (tmp_path / "job" / "logs" / "gpu-a12" / "1").mkdir()
    (tmp_path / "job" / "logs" / "gpu-a12" / "1" / "train.log").write_text("again\n")
    nodes = sorted(f.node for f in discover(tmp_path / "job").files)
    assert nodes == ["gpu-a10", "gpu-a10", "gpu-a11", "gpu-a12", "gpu-a12"]
    # one directory alone does not say it is a node's: the names stand
    other = tmp_path / "other" / "logs" / "run1"
    (other / "1").mkdir(parents=True)
    (other / "train.log").write_text("a\n")
    (other / "1" / "train.log").write_text("b\n")
    (other / "eval.log").write_text("c\n")
    assert sorted(f.node for f in discover(tmp_path / "other").files) == ["eval", "train", "train"]


def test_a_real_run_laid_out_one_directory_per_node_reads_as_the_flat_one(tmp_path):
    import shutil

    from l4.engine import diagnose
    from tests.realrun_cases import unpack

    case, truth = unpack("case-0", tmp_path / "flat")
    moved = tmp_path / "dirs" / "case-0"
    shutil.copytree(case, moved)
    for job in [moved / "failed", *(moved / b for b in truth["baselines"])]:
        for f in list((job / "logs").glob("*.log")):
            (job / "logs" / f.stem).mkdir()
            f.rename(job / "logs" / f.stem / "train.log")
    bases = truth["baselines"]
    flat = diagnose(case / "failed", baselines=[case / b for b in bases], store_path=False)
    dirs = diagnose(moved / "failed", baselines=[moved / b for b in bases], store_path=False)
    assert [n["node"] for n in dirs["nodes"]] == [n["node"] for n in flat["nodes"]]
    assert dirs["nodes"][0]["node"] == truth["faulty_nodes"][0]
    assert (dirs["stage"], dirs["iterations"][:1]) == (flat["stage"], flat["iterations"][:1])
