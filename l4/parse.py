"""The parser on its own: every line of one file with its template (``l4 parse``).

This is the per-line view.  Diagnosis never needs it (it works on the grouped scan), but
it is how a user checks what l4 makes of their log format, and it is the reference the fast
path is compared against (``plain_drain3_templates``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from l4.ingest import ReadStats
from l4.mask import is_continuation, mask_line
from l4.templates import TemplateStore, open_store
from l4.wrapped import read_unwrapped


def parse_file(path: str | Path, *, store_path: str | Path | None = None) -> Iterator[dict]:
    """Yield ``{"line", "template_id", "template"}`` for every line of ``path``.

    Two passes over the distinct shapes keep it consistent: templates are learnt first
    (drain3 generalises as it sees more lines), then every line is reported with the final
    template of its cluster.  Blank lines and traceback continuation lines get the record
    they belong to.
    """
    path = Path(path)
    with open_store(store_path) as store:
        yield from _parse(path, store)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number of the file line it is on, line) of each line the program printed (a
    wrapped file's lines are unwrapped: ``l4.wrapped``)."""
    stats = ReadStats()
    n = 0
    for block, _, nos in read_unwrapped(path, stats):
        text = block.decode("utf-8", errors="replace")
        if text.endswith("\n"):
            text = text[:-1]
        lines = text.split("\n")
        if nos is None:
            yield from enumerate(lines, n + 1)
            n += len(lines)
        else:
            yield from zip(nos.tolist(), lines, strict=True)
    if stats.error:
        print(f"warning: {path}: {stats.error}", file=sys.stderr)


def _parse(path: Path, store: TemplateStore) -> Iterator[dict]:
    cluster_of: dict[str, int] = {}
    for _, line in _lines(path):
        if not line.strip() or is_continuation(line):
            continue
        masked = mask_line(line)
        if masked not in cluster_of:
            cluster_of[masked] = store.add(masked)
    last: int | None = None
    for n, line in _lines(path):
        if not line.strip():
            yield {"line": n, "template_id": None, "template": ""}
            continue
        if is_continuation(line) and last is not None:
            yield {"line": n, "template_id": str(last), "template": store.template(last),
                   "continuation": True}
            continue
        cid = cluster_of.get(mask_line(line))
        if cid is None:  # a continuation line with no record before it
            cid = store.add(mask_line(line))
        last = cid
        yield {"line": n, "template_id": str(cid), "template": store.template(cid)}


def plain_drain3_templates(lines: list[str], store: TemplateStore | None = None) -> list[int]:
    """Reference path: every line through mask_line and drain3, one by one, in order."""
    store = store or TemplateStore(None)
    ids = [store.add(mask_line(line)) for line in lines]
    return ids
