"""A launcher that writes who printed a line in a column before "||".

Why: Determined AI's trial logs put a container id and a rank tag before a "||" column
("[2024-11-01T05:11:39.526000Z] 78cd38d8 [rank=3] || ..."); the master's own lines leave
the id blank.  Read as part of the message, the prefix kept a traceback's frames from
folding into their exception (the report showed "Traceback (most recent call last):" and
lost the frames that name the stage), and the "||" was masked as a progress bar.
"""

from __future__ import annotations

from l4.engine import diagnose
from l4.mask import is_continuation, mask_line, strip_prefix

P = "[2024-11-01T05:11:39.526000Z] 78cd38d8 [rank=3] || "


def test_the_column_prefix_is_who_printed_the_line():
    assert strip_prefix(P + "INFO: step 10: loss=2.5") == "INFO: step 10: loss=2.5"
    assert strip_prefix("[2024-11-01T05:11:28.000000Z]          || INFO: Scheduling Trial 7") \
        == "INFO: Scheduling Trial 7"
    assert is_continuation(P + '  File "/app/train.py", line 298, in <module>')
    assert not is_continuation(P + "ValueError: bad model type")
    assert mask_line(P + "ValueError: bad") == mask_line("ValueError: bad")
    # "||" inside a message is the message's
    assert "||" in strip_prefix("INFO: a || b")


def _job(root, *, fail: bool) -> None:
    logs = root / "logs"
    logs.mkdir(parents=True)
    for node in range(3):
        cid = f"{0x78cd38d8 + node:08x}"
        out = ["[2024-11-01T05:11:28.000000Z]          || INFO: Trial 7924 was assigned to an agent",
               f"[2024-11-01T05:11:30.000000Z] {cid} || INFO: copying files to container"]
        for r in range(2):
            rank = 2 * node + r
            pre = f"[2024-11-01T05:11:38.{rank}00000Z] {cid} [rank={rank}] || "
            out.append(pre + "INFO: __main__: Loading llama2_7b from /mnt/models/llama2_7b")
            if fail:
                out += [pre + "Traceback (most recent call last):",
                        pre + '  File "/run/determined/workdir/train.py", line 298, in <module>',
                        pre + "    model = AutoModelForCausalLM.from_pretrained(path)",
                        pre + '  File "/opt/conda/lib/python3.10/site-packages/transformers/models/'
                              'auto/configuration_auto.py", line 1038, in from_pretrained',
                        pre + "    raise ValueError(",
                        pre + "ValueError: The checkpoint you are trying to load has model type "
                              "`qwen3` but Transformers does not recognize this architecture."]
                continue
            out.append(pre + "INFO: __main__: Model loaded: 6,738,415,616 parameters")
            for step in range(10, 110, 10):
                out.append(f"[2024-11-01T05:12:{step // 2:02d}.000000Z] {cid} [rank={rank}] || "
                           f"INFO: __main__: step {step}: loss={3 - step / 100:.3f}")
        (logs / f"gpu-{node}.log").write_text("\n".join(out) + "\n")


def test_a_traceback_behind_the_column_folds_into_its_exception(tmp_path):
    _job(tmp_path / "ok", fail=False)
    _job(tmp_path / "failed", fail=True)
    report = diagnose(tmp_path / "failed", baselines=[tmp_path / "ok"], store_path=False)
    first = report["events"][0]
    assert first["template"].startswith("ValueError: The checkpoint you are trying to load")
    assert any("from_pretrained" in c for c in first["examples"][0]["context"])
    assert report["stage"] == "model_loading"
