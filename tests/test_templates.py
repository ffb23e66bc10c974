"""The persisted template store: ids survive a reload and matching behaves the same."""

import pytest

from l4.mask import mask_line
from l4.templates import TemplateStore, open_store

LINES = [
    "NCCL INFO comm 0x1234 rank 3 nranks 64 - Init COMPLETE",
    "iteration 10/ 100 | lm loss: 2.5 | grad norm: 1.0",
    "iteration 20/ 100 | lm loss: 2.4 | grad norm: 0.9",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "saving checkpoint at iteration 100 to /ckpt/run1",
]


def test_ids_and_matching_survive_a_reload(tmp_path):
    path = tmp_path / "t.store"
    with open_store(path) as store:
        ids = [store.add(mask_line(line)) for line in LINES]
    with open_store(path) as again:
        assert len(again) == len(set(ids))
        for line, cid in zip(LINES, ids, strict=True):
            assert again.match(mask_line(line)) == cid
        # learning continues after a reload: same line, same id; new line, new id
        assert again.add(mask_line(LINES[0])) == ids[0]
        new = again.add("a brand new message about something")
        assert new not in ids


def test_corrupt_store_is_a_clear_error_and_untouched(tmp_path):
    path = tmp_path / "t.store"
    path.write_bytes(b"not a store")
    with pytest.raises(ValueError, match="unreadable"):
        TemplateStore(path)
    assert path.read_bytes() == b"not a store"


def test_a_template_of_wildcards_only_takes_no_line_with_words(tmp_path):
    """A bare log prefix (torchrun's ``W0224 ... run.py:793]`` with an empty message) masks
    to wildcards only.  Its template must not swallow the lines of the same length that come
    after it, in this job or in later ones: a job's events would depend on what the store
    saw before."""
    bare = "<*> <*> <*> <*>"
    worded = ["[rank0]:done with setup ...", "[INFO] HCCL_CONNECT_TIMEOUT=<*> HCCL_EXEC_TIMEOUT=<*> HCCL_IF_IP=<*>"]
    path = tmp_path / "t.store"
    with open_store(path) as first:
        wild = first.add(bare)
        assert first.add(bare) == wild
    with open_store(path) as later:
        ids = [later.add(line) for line in worded]
        assert wild not in ids and len(set(ids)) == 2
        assert [later.add(line) for line in worded] == ids  # and they keep their own ids
        assert [later.match(line) for line in worded] == ids
        assert later.match(bare) == wild
        assert later.match("three words only") is None
