"""Masking: what it hides, and the invariance the fast path depends on."""

from hypothesis import given, settings
from hypothesis import strategies as st

from l4.mask import collapse_digits, is_continuation, mask_line, numbers_in, strip_prefix


def test_masks_training_log_variables():
    line = ("[rank3]: 2024-05-01 12:00:00,123 NCCL INFO comm 0x55d5c8a0b0c0 rank 3 nranks 64 "
            "busId 3b000 via 10.0.3.17:29500 file /data/ckpt/iter_0000100/model.pt "
            "shape torch.Size([4096, 1024]) on gpu-node-17.cluster.local")
    masked = mask_line(line)
    for leaked in ("0x55d5", "10.0.3.17", "/data/ckpt", "4096", "gpu-node-17", "2024", "rank3"):
        assert leaked not in masked
    assert masked.startswith("NCCL INFO comm <HEX> rank <*> nranks <*>")
    assert "via <ADDR> file <PATH>" in masked and "<SHAPE>" in masked and "on <HOST>" in masked


def test_prefixes_are_not_part_of_the_message():
    msg = "RuntimeError: CUDA error: an illegal memory access was encountered"
    variants = [msg, f"[rank7]: {msg}", f"[default3]:{msg}", f"12: {msg}",
                f"2024-05-01T12:00:00.5Z {msg}", f"[rank0]: 2024-05-01 12:00:00,1 {msg}"]
    assert {mask_line(v) for v in variants} == {msg}
    assert strip_prefix(f"3: {msg}") == msg


def test_pdsh_host_prefixes_are_not_part_of_the_message():
    """pdsh prefixes every line with the host it came from, with or without a dash."""
    msg = "[W socket.cpp:752] [c10d] The client socket cannot be initialized"
    assert strip_prefix(f"cn210: {msg}") == msg
    assert strip_prefix(f"dgx-h100-13j: {msg}") == msg
    assert is_continuation('cn210:   File "/x.py", line 3, in f')
    # a counter or a level in front of a message is the message
    assert strip_prefix("epoch3: loss 2.5") == "epoch3: loss 2.5"
    assert strip_prefix("ERROR: ld.so: object cannot be preloaded") == "ERROR: ld.so: object cannot be preloaded"
    assert strip_prefix("pdsh@cn210: cn239: ssh exited with exit code 1").startswith("pdsh@cn210")


def test_continuation_lines_are_indented():
    assert is_continuation('  File "/x.py", line 3, in f')
    assert is_continuation('[rank1]:   File "/x.py", line 3, in f')
    assert not is_continuation("Traceback (most recent call last):")
    assert not is_continuation("   ")


def test_numbers_exclude_timestamps():
    nums = numbers_in("2024-05-01 12:00:00,123  iteration      120/  50000 | loss: 2.5")
    assert nums == [120.0, 50000.0, 2.5]


line_chars = st.text(
    alphabet=st.sampled_from(list("abcdefxXZ0123456789 .:-_/[](),=<>*+|\t'\"")), max_size=80
)


@settings(max_examples=400, deadline=None)
@given(line_chars)
def test_masking_cannot_tell_digits_apart(line):
    """mask_line(x) == mask_line(collapse_digits(x)): the fast path's correctness."""
    assert mask_line(line) == mask_line(collapse_digits(line))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_masking_never_fails_on_any_text(line):
    out = mask_line(line)
    assert isinstance(out, str) and "\n" not in out
