"""A line that the library's faults of every team quote names no team (``category_spread``).

Every failed torchrun job prints "failed (exitcode: 1) local_rank: 0 (pid: ...) of binary"
and "ChildFailedError", whatever went wrong, and the library's patterns of several
categories quote those lines about equally well.  In a diagnosed job they are the
culprit's loudest lines, so they outvoted the lines that set the fault apart.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from l4 import rootcause
from l4.rootcause import category_spread

CATS = {"a": "user", "b": "framework", "c": "platform", "d": "user", "e": "hardware"}


def _sims(rows: dict[str, list[float]]) -> dict[str, dict[int, tuple]]:
    return {pid: {qi: (s, None, 0.0) for qi, s in enumerate(vals)} for pid, vals in rows.items()}


def test_near_ties_across_teams_spread_and_a_clear_best_does_not() -> None:
    # line 0: three teams quote it within the margin; line 1: one pattern stands out;
    # line 2: two patterns of one team tie; line 3: like nothing in the library
    sims = _sims({"a": [0.73, 0.95, 0.90, 0.3], "b": [0.73, 0.70, 0.50, 0.2],
                  "c": [0.71, 0.60, 0.40, 0.1], "d": [0.60, 0.50, 0.89, 0.3], "e": [0.20, 0.1, 0.1, 0.1]})
    spread = category_spread(sims, CATS, 4, margin=0.03, floor=0.6)
    assert spread[0] == 1 - 1 / 3
    assert spread[1] == 0.0
    assert spread[2] == 0.0
    assert spread[3] == 0.0


@given(st.lists(st.floats(0.0, 1.0), min_size=5, max_size=5), st.floats(0.0, 0.2), st.floats(0.0, 1.0))
def test_spread_is_a_share_and_zero_for_one_team(vals: list[float], margin: float, floor: float) -> None:
    sims = _sims({pid: [v] for pid, v in zip(CATS, vals, strict=True)})
    s = category_spread(sims, CATS, 1, margin=margin, floor=floor)[0]
    assert 0.0 <= s < 1.0
    one_team = category_spread(sims, dict.fromkeys(CATS, "user"), 1, margin=margin, floor=floor)[0]
    assert one_team == 0.0


def test_the_launchers_summary_weighs_less_than_the_culprits_own_words(kb: Path) -> None:
    """With the real library and model: torchrun's summary is spread across teams, the
    stated fault is not, and the vote follows the fault."""
    lines = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "E0518 08:26:35.950889 388236 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: 1) local_rank: 0 (pid: 388240) of binary: /usr/bin/python3",
        "OSError: [Errno 122] Disk quota exceeded: '/home/user/ckpt/step_1200/model.safetensors'",
    ]
    units = rootcause.units_from_lines(lines)
    sims, _ = rootcause._similarities(units, kb)
    lib = {p.id: p.category for p in rootcause._library(kb)}
    spread = dict(zip((u.text for u in units), category_spread(sims, lib, len(units)), strict=True))
    assert spread[lines[0]] > 0.3
    assert spread[lines[2]] == 0.0
