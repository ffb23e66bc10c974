"""The accuracy benchmark's event scoring: a reported template against a truth line.

The benchmark once compiled each template into a regex of ``.*?`` pieces; a template with
many wildcards against a long truth line backtracked for minutes.  The matcher now places
the literal pieces in order; these tests hold it to the regex's answers.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

_SPEC = importlib.util.spec_from_file_location(
    "bench_accuracy", Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py")
accuracy = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(accuracy)

_WS = re.compile(r"\s+")


def _reference(template: str, line: str) -> bool:
    """The former regex semantics: whole line, or inside it for >= 20 literal characters."""
    parts = _WS.sub(" ", template.strip()).split("<*>")
    literal = sum(len(p.strip()) for p in parts)
    if literal < 3:
        return False
    rx = re.compile(".*?".join(re.escape(p) for p in parts))
    return bool(rx.fullmatch(line)) or (literal >= 20 and rx.search(line) is not None)


_PIECES = st.sampled_from(["a", "b", "ab", " ", "<*>", "x:", "abc ", "a" * 11, "b" * 12])
_LINE = st.lists(st.sampled_from(["a", "b", "x:", " ", "ab", "a" * 11, "b" * 12]), max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=8), _LINE)
def test_matcher_agrees_with_the_wildcard_regex(pieces: list[str], words: list[str]) -> None:
    template = "".join(pieces)
    line = _WS.sub(" ", "".join(words)).strip()
    assert accuracy.template_matches(template, line) == _reference(template, line)


def test_examples() -> None:
    tm = accuracy.template_matches
    assert tm("Watchdog caught collective operation timeout: <*>",
              "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<*>)")
    assert not tm("<*> timeout <*>", "a time out b")
    assert tm("RuntimeError: CUDA error: an illegal memory access", "[rank3]: RuntimeError: CUDA error: "
              "an illegal memory access was encountered")  # long template inside a line
    assert not tm("ab", "xab")  # short template: whole line only
    assert not tm("<*> <*>", "anything")  # all wildcard: no evidence
