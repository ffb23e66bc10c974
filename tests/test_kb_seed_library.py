"""The reviewed seed library (kb/seed_patterns.yaml) is valid data.

The file is hand-reviewed data mined from public failure reports; these checks keep it
loadable by l4.kbstore and honest: every pattern has all fields, a known category, real
sources, unique ids, and the library is large and balanced enough to cover the four
categories (issue 10 asks for at least 250 reviewed patterns).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml

from l4 import kbstore
from l4.rootcause import extract_codes

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "kb" / "seed_patterns.yaml"
# ../shared/ beside the checkout (as in conftest), or beside the worktrees' parent.
REAL = next((d / "data" / "real-failures.jsonl" for d in (ROOT.parent / "shared", ROOT.parents[1] / "shared")
             if (d / "data" / "real-failures.jsonl").exists()), ROOT.parent / "shared" / "data" / "real-failures.jsonl")
CATEGORIES = {"hardware", "user", "platform", "framework"}
URL = re.compile(r"^https://[\w.-]+\.[a-z]{2,}/\S+$")


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    """The patterns as written in the YAML file (before kbstore normalises them)."""
    return yaml.safe_load(SEED.read_text(encoding="utf-8"))["patterns"]


def test_library_is_large_and_ids_are_unique(raw: list[dict]) -> None:
    ids = [p["id"] for p in raw]
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    assert not dupes, dupes
    assert len(ids) >= 250


def test_every_pattern_has_all_fields(raw: list[dict]) -> None:
    for p in raw:
        for field in ("id", "title", "category", "description", "action", "indicators", "sources"):
            assert p.get(field), (p.get("id"), field)
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]{1,79}", p["id"]), p["id"]
        assert p["category"] in CATEGORIES, (p["id"], p["category"])
        assert p.get("kind", "cause") in {"cause", "symptom"}, p["id"]
        assert isinstance(p.get("codes", []), list), p["id"]
        inds = p["indicators"]
        assert isinstance(inds, list) and 2 <= len(inds) <= 8, p["id"]
        assert all(isinstance(i, str) and i.strip() for i in inds), p["id"]
        assert len(set(inds)) == len(inds), p["id"]


def test_every_source_is_a_url(raw: list[dict]) -> None:
    for p in raw:
        for s in p["sources"]:
            assert URL.match(s), (p["id"], s)


def test_codes_are_canonical_and_required_codes_are_present(raw: list[dict]) -> None:
    """A listed code is spelled as extract_codes spells it, or the matcher never sees it."""
    for p in raw:
        for c in p.get("codes", []):
            assert re.fullmatch(r"[A-Z0-9_]+|nccl[A-Za-z]+", c), (p["id"], c)
        if p.get("requires_code"):
            assert p.get("codes"), p["id"]
            # a code-gated pattern must be reachable from its own indicators
            found = set().union(*(extract_codes(i) for i in p["indicators"]))
            assert found & set(p["codes"]), p["id"]


def test_categories_are_balanced(raw: list[dict]) -> None:
    """User and framework faults are matched worst today: each category keeps a real share."""
    counts = Counter(p["category"] for p in raw)
    assert set(counts) == CATEGORIES
    for cat in CATEGORIES:
        assert counts[cat] >= 0.18 * len(raw), counts


def test_no_indicator_is_shared_by_two_patterns(raw: list[dict]) -> None:
    """The same line under two patterns would make the library contradict itself."""
    owner: dict[str, str] = {}
    for p in raw:
        for i in p["indicators"]:
            key = " ".join(i.split()).lower()
            assert key not in owner, (i, owner.get(key), p["id"])
            owner[key] = p["id"]


def test_library_loads_through_kbstore(raw: list[dict]) -> None:
    pats = kbstore.seed_patterns()
    assert [p["id"] for p in pats] == [p["id"] for p in raw]
    assert {p["category"] for p in pats} == CATEGORIES


def _held_out(excerpt_id: str) -> bool:
    # Same split as benchmarks/kb_accuracy.py (salt "l4-kb-heldout-v1").
    return int(hashlib.sha256(("l4-kb-heldout-v1" + excerpt_id).encode()).hexdigest(), 16) % 10 < 3


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data/real-failures.jsonl not available")
def test_held_out_excerpts_are_not_copied(raw: list[dict]) -> None:
    """Evaluation excerpts stay unseen: no held-out line and no held-out source in the library."""
    rows = [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()]
    held = [r for r in rows if r.get("kind") == "failure" and _held_out(r["id"])]
    # Lines carrying run-specific detail (pids, sizes, addresses); a bare library message
    # such as "ncclRemoteError: ..." is the library's text, not a copy of an excerpt.
    specific = re.compile(r"\d{3,}|\d+\.\d+\.\d+\.\d+")
    held_lines = {" ".join(line.split()) for r in held for line in r["lines"] if specific.search(line)}
    held_sources = {r["source"] for r in held}
    for p in raw:
        assert not held_sources & set(p["sources"]), p["id"]
        for i in p["indicators"]:
            assert " ".join(i.split()) not in held_lines, (p["id"], i)


EXEMPLARS = ROOT / "kb" / "category_exemplars.yaml"


def test_category_exemplars_are_valid_data() -> None:
    """Every exemplar (real lines that teach the category classifier) has a known category,
    a URL source of its own, non-empty lines and a note saying why that category."""
    ex = yaml.safe_load(EXEMPLARS.read_text(encoding="utf-8"))["exemplars"]
    assert len(ex) >= 50
    sources = [e["source"] for e in ex]
    assert len(set(sources)) == len(sources), "one entry per report"
    for e in ex:
        assert e["category"] in CATEGORIES, e["source"]
        assert URL.match(e["source"]), e["source"]
        assert e["lines"] and all(str(t).strip() for t in e["lines"]), e["source"]
        assert str(e.get("note") or "").strip(), e["source"]
    assert {e["category"] for e in ex} == CATEGORIES
    _, loaded = kbstore.category_exemplars()
    assert len(loaded) == len(ex)


@pytest.mark.skipif(not REAL.exists(), reason="../shared/data/real-failures.jsonl not available")
def test_held_out_excerpts_are_not_exemplars() -> None:
    """No exemplar cites a held-out excerpt's source or copies one of its lines."""
    rows = [json.loads(line) for line in REAL.read_text().splitlines() if line.strip()]
    held = [r for r in rows if r.get("kind") == "failure" and _held_out(r["id"])]
    held_lines = {" ".join(line.split()) for r in held for line in r["lines"]}
    held_sources = {r["source"] for r in held}
    exemplars = yaml.safe_load(EXEMPLARS.read_text(encoding="utf-8"))["exemplars"]
    # the messages name the exemplar only, never a held-out line
    assert not [e["source"] for e in exemplars if e["source"] in held_sources]
    copied = [(e["source"], line) for e in exemplars for line in e["lines"]
              if " ".join(str(line).split()) in held_lines]
    assert not copied, copied
