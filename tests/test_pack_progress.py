"""The pack's progress counts a step when its first line is out, not its last.

A node lost at once (power loss) takes the output it had not flushed with it, so the
iteration in progress comes from its peers, which collectives held in step with it: the
steps they completed before their own trouble began.  A progress bar is redrawn when its
process exits (tqdm closes the bar), so the last line of a count can come after the
peer's error although the step was done long before.  Read by that last line, every peer
seemed one step behind, and the failure was placed one iteration early.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bar_jobs import diagnose_three_nodes

tqdm = pytest.importorskip("tqdm").tqdm

PER = 40
#: the lost node printed 2 epochs and 17 steps (97 done); its peers got one step further
LOST_AT, PEERS_AT = 17, 18


def _node(path: Path, failed: bool, role: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fh.write("INFO:train:world size 6, 2 ranks per node\n")
        fh.write("INFO:train:building dataset from /data/corpus (6400 samples)\n")
        for ep in range(4):
            bar = tqdm(total=PER, file=fh, desc=f"Epoch {ep}", mininterval=0, miniters=1,
                       ncols=100)
            stop = None
            if failed and ep == 2:
                stop = LOST_AT if role == "crash" else PEERS_AT
            for i in range(stop if stop is not None else PER):
                bar.update(1)
                bar.set_postfix(loss=f"{2.5 - ep * 0.1 - i / 1000:.3f}", refresh=True)
            if stop is None:
                bar.close()
                continue
            if role == "crash":
                return  # the whole node went down: nothing more reaches its log
            fh.write("\n[rank2]: Traceback (most recent call last):\n"
                     '[rank2]:   File "train.py", line 336, in main\n'
                     "[rank2]:     loss.backward()\n"
                     "[rank2]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] "
                     "Connection closed by peer [10.1.0.7]:39854\n")
            bar.close()  # redrawn as the process exits: the same count, after the error
            fh.write("E1202 13:03:04.100000 77 torch/distributed/elastic/multiprocessing/api.py:869]"
                     " failed (exitcode: 1) local_rank: 0 (pid: 77) of binary: python\n")
            return
        fh.write("INFO:train:training finished after 160 steps\n")


def test_a_bar_redrawn_after_the_peers_error_still_counts_where_the_step_was_done(
        tmp_path, monkeypatch):
    monkeypatch.setenv("L4_TEMPLATES", str(tmp_path / "t.drain3"))
    rep = diagnose_three_nodes(tmp_path, _node)
    assert rep["nodes"][0]["node"] == "node-1", rep["nodes"]
    # epochs 0 and 1 (40 steps each) and 18 steps of epoch 2 done by the pack: step 99 was
    # in progress when the node was lost
    assert rep["iterations"][0]["iteration"] == 2 * PER + PEERS_AT + 1, rep["iterations"]
