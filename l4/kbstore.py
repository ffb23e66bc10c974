"""The fault knowledge base: one DuckDB file with patterns, diagnoses and normal pools.

DuckDB lets one process hold a database file at a time (a writer also blocks readers in
other processes), while a flow records diagnoses and an SRE confirms others from the CLI
at the same moment.  So nothing here keeps a connection open: every call opens the file,
runs one short transaction and closes it, and opening retries with backoff while another
process holds the lock (bounded by ``L4_KB_LOCK_TIMEOUT``, 30 s by default).  Every write
runs inside BEGIN/COMMIT, so an exception or a killed process leaves the previous state.

The file is created, migrated and seeded with ``kb/seed_patterns.yaml`` on first use.
A file at the KB path that is not an l4 knowledge base is never modified.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb
import yaml

SCHEMA_VERSION = 6
CATEGORIES = ("hardware", "user", "platform", "framework")
KINDS = ("cause", "symptom")
STATUSES = ("pending", "confirmed", "rejected")
EXPORT_FORMAT = "l4-kb-export"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,79}$")
_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")
_NORMAL_FIELDS = ("template", "total_count", "n_nodes_with", "n_nodes", "max_per_node", "lines_total")

# Numbered migrations after the base schema (version -> list of SQL statements).
MIGRATIONS: dict[int, list[str]] = {}

# --- migration 2: idempotent diagnoses ------------------------------------------------------
# failure_key: the id of the failure a diagnosis is for (l4.ingest.failure_key), so the same
# failure delivered twice is stored once; logs_fingerprint: the node files' state when it
# was diagnosed, so a re-delivery after the logs changed is diagnosed again.
MIGRATIONS[2] = [
    "ALTER TABLE diagnoses ADD COLUMN IF NOT EXISTS failure_key VARCHAR",
    "ALTER TABLE diagnoses ADD COLUMN IF NOT EXISTS logs_fingerprint VARCHAR",
]


# --- migration 3: phase timelines in the normal pool --------------------------------------
# Where each event sits in a healthy run (start-up, loop, end; its place in the start-up;
# the stage that place names; whether it counted the steps): l4.phases, so a stored pool
# teaches stage and iteration as baselines on the command line do.
MIGRATIONS[3] = [
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS phase VARCHAR",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS place DOUBLE",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS stage VARCHAR",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS named VARCHAR",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS share DOUBLE",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS counter BOOLEAN",
]
_PHASE_FIELDS = ("phase", "place", "stage", "named", "share", "counter", "first_count",
                 "pace_first", "pace_step", "pace_anchor")


# --- migration 4: embedding cache and category classifier (issue 10) -------------------------
# embed_cache: one vector per (model, text), keyed by sha256(model + text), so a template
# seen once is never embedded again, in this process or any later one.
# category_models: the fitted category classifier (plain arrays as JSON), one row per
# training fingerprint; a library or confirmation change gives a new fingerprint.
_MIGRATION_EMBED_CACHE = [
    """CREATE TABLE IF NOT EXISTS embed_cache (
        key        VARCHAR PRIMARY KEY,
        model      VARCHAR NOT NULL,
        embedding  FLOAT[384] NOT NULL,
        created_at TIMESTAMP NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS category_models (
        fingerprint VARCHAR PRIMARY KEY,
        model       VARCHAR NOT NULL,
        trained_at  TIMESTAMP NOT NULL
    )""",
]
MIGRATIONS[4] = _MIGRATION_EMBED_CACHE

# --- migration 5: the first count a healthy run printed -----------------------------------
# A counter's first count in a healthy run (a resumed run's first step): the step a failed
# job was in when it died before printing one (l4.phases.first_step).
MIGRATIONS[5] = ["ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS first_count DOUBLE"]

# --- migration 6: the pace of a line healthy runs printed every few steps -----------------
# An unnumbered loop line (a Trainer's loss line every 25 steps): the step of its first
# occurrence, steps per line, and the numbered line that paced it (a save's template): a
# failed job that numbers too few steps is counted by these lines (l4.phases.paced_steps).
MIGRATIONS[6] = [
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS pace_first DOUBLE",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS pace_step DOUBLE",
    "ALTER TABLE normal_rows ADD COLUMN IF NOT EXISTS pace_anchor VARCHAR",
]


class KBError(RuntimeError):
    """A knowledge-base problem with a message meant for the user (no traceback)."""


# --- locating things --------------------------------------------------------------------


def default_kb_path() -> Path:
    """``$L4_KB`` if set, else <user data dir>/l4/kb.duckdb."""
    env = os.environ.get("L4_KB")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("l4", appauthor=False)) / "kb.duckdb"


def resolve_kb(kb: Path | str | None) -> Path:
    return Path(kb).expanduser() if kb else default_kb_path()


def _kb_resource(name: str) -> str:
    """Text of a file shipped in the ``kb`` package (schema, seed library)."""
    try:
        return resources.files("kb").joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[1] / "kb" / name).read_text(encoding="utf-8")


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat(timespec="microseconds") if ts is not None else None


def _parse_ts(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    try:
        ts = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise KBError(f"invalid timestamp {value!r}") from exc
    if ts.tzinfo is not None:
        ts = ts.astimezone(UTC).replace(tzinfo=None)
    return ts


# --- connections --------------------------------------------------------------------------


def _lock_timeout() -> float:
    try:
        return float(os.environ.get("L4_KB_LOCK_TIMEOUT", "30"))
    except ValueError:
        return 30.0


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    """Open the file, waiting (bounded) while another process holds it."""
    if path.exists() and path.is_dir():
        raise KBError(f"knowledge base path {path} is a directory, expected a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KBError(f"cannot create the directory for the knowledge base {path}: {exc}") from exc
    deadline = time.monotonic() + _lock_timeout()
    delay = 0.02
    while True:
        try:
            # never fetch or load extensions: a SQLite (or other foreign) file at the KB
            # path would otherwise make DuckDB try to download a scanner for it
            return duckdb.connect(str(path), config=_CONNECT_CONFIG)
        except duckdb.Error as exc:
            msg = str(exc)
            if any(m in msg for m in _LOCK_MARKERS):
                if time.monotonic() >= deadline:
                    raise KBError(
                        f"the knowledge base {path} is locked by another process "
                        f"(waited {_lock_timeout():.0f} s); try again later"
                    ) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)
                continue
            raise _kb_error(path, exc) from exc


_CONNECT_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
_DAMAGE_MARKERS = ("Corrupt", "checksum", "Could not read", "not a valid DuckDB", "Serialization",
                   "Failed to download extension", "extension", "INTERNAL Error",
                   "database has been invalidated", "Catalog Error")
_FULL_MARKERS = ("No space left", "Disk quota exceeded", "File too large")


def restore_hint(path: Path) -> str:
    return (f"restore a backup (`cp BACKUP {path}`; `l4 kb backup FILE` makes one) or move "
            f"{path} away to start a new knowledge base")


def _kb_error(path: Path, exc: BaseException) -> KBError:
    """A DuckDB failure as one line that names the file and says what to do."""
    msg = " ".join(str(exc).split())
    if any(m in msg for m in _FULL_MARKERS):
        return KBError(f"cannot write the knowledge base {path}: the disk is full ({msg[:200]}); "
                       "nothing was changed and the previous state is intact; free space and retry")
    if any(m in msg for m in _DAMAGE_MARKERS) or isinstance(
            exc, duckdb.IOException | duckdb.SerializationException | duckdb.InternalException):
        return KBError(f"{path} is damaged or not an l4 knowledge base ({msg[:200]}); it was "
                       f"left untouched: {restore_hint(path)}")
    return KBError(f"knowledge base {path}: {msg[:300]}")


# Files this process already migrated and seeded, by identity: checking again costs a
# query per connection, and a ``kb match`` opens the file several times.  Any change of
# the file (replaced, written by anyone) or of the seed library changes its identity and
# it is checked again.
_prepared: set[tuple] = set()


def _identity(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, _seed_hash())


@contextmanager
def connect(kb: Path | str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A migrated, seeded connection that is closed on exit (never keep it around).

    Any DuckDB failure inside (a damaged file, a full disk) becomes a :class:`KBError`
    naming the file; DuckDB itself guarantees the file keeps its last committed state."""
    path = resolve_kb(kb)
    con = _open(path)
    try:
        ident = _identity(path)
        if ident is None or ident not in _prepared:
            _prepare(con, path)
            ident = _identity(path)
            if ident is not None:
                _prepared.add(ident)
        yield con
    except duckdb.Error as exc:
        raise _kb_error(path, exc) from exc
    finally:
        with suppress(duckdb.Error):
            con.close()


@contextmanager
def transaction(kb: Path | str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """One atomic unit of work: committed on success, rolled back on any exception."""
    with connect(kb) as con:
        con.execute("BEGIN TRANSACTION")
        try:
            yield con
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
        try:
            con.execute("COMMIT")
        except duckdb.Error:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
    ).fetchall()
    return {r[0] for r in rows}


def _split_sql(text: str) -> list[str]:
    return [s.strip() for s in text.split("\n;;\n") if s.strip() and not _only_comments(s)]


def _only_comments(stmt: str) -> bool:
    return all(not ln.strip() or ln.strip().startswith("--") for ln in stmt.splitlines())


def _prepare(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Create or migrate the schema, then load the seed library if it changed."""
    tables = _tables(con)
    if "kb_meta" not in tables:
        if tables:
            raise KBError(
                f"{path} is a DuckDB file but not an l4 knowledge base (it has tables "
                f"{sorted(tables)[:5]} and no kb_meta); it was left untouched: {restore_hint(path)}"
            )
        con.execute("BEGIN TRANSACTION")
        try:
            for stmt in _split_sql(_kb_resource("schema.sql")):
                con.execute(stmt)
            con.execute("INSERT INTO kb_meta VALUES ('schema_version', ?)", [str(1)])
            _migrate(con, 1)
            _load_seed(con)
            con.execute("COMMIT")
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise
        return
    version = int(_meta(con, "schema_version") or 0)
    if version > SCHEMA_VERSION:
        raise KBError(
            f"{path} has schema version {version}, newer than this l4 understands "
            f"({SCHEMA_VERSION}); upgrade l4"
        )
    if version < SCHEMA_VERSION or _meta(con, "seed_hash") != _seed_hash():
        con.execute("BEGIN TRANSACTION")
        try:
            _migrate(con, version)
            if _meta(con, "seed_hash") != _seed_hash():
                _load_seed(con)
            con.execute("COMMIT")
        except BaseException:
            with suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise


def _migrate(con: duckdb.DuckDBPyConnection, from_version: int) -> None:
    for v in range(from_version + 1, SCHEMA_VERSION + 1):
        for stmt in MIGRATIONS.get(v, []):
            con.execute(stmt)
        _set_meta(con, "schema_version", str(v))


def _meta(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = con.execute("SELECT value FROM kb_meta WHERE key = ?", [key]).fetchone()
    return row[0] if row else None


def _set_meta(con: duckdb.DuckDBPyConnection, key: str, value: str) -> None:
    con.execute("DELETE FROM kb_meta WHERE key = ?", [key])
    con.execute("INSERT INTO kb_meta VALUES (?, ?)", [key, value])


# --- seed library -------------------------------------------------------------------------

_seed_cache: tuple[str, list[dict]] | None = None


_seed_hash_cache: str | None = None
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster


def _seed() -> tuple[str, list[dict]]:
    global _seed_cache
    if _seed_cache is None:
        text = _kb_resource("seed_patterns.yaml")
        doc = yaml.load(text, Loader=_YAML_LOADER) or {}  # noqa: S506 - a safe loader
        patterns = [validate_pattern(p) for p in doc.get("patterns", [])]
        _seed_cache = (hashlib.sha256(text.encode()).hexdigest(), patterns)
    return _seed_cache


def _seed_hash() -> str:
    """Hash of the seed file, without parsing it (parsing is only needed to load it)."""
    global _seed_hash_cache
    if _seed_cache is not None:
        return _seed_cache[0]
    if _seed_hash_cache is None:
        _seed_hash_cache = hashlib.sha256(_kb_resource("seed_patterns.yaml").encode()).hexdigest()
    return _seed_hash_cache


def seed_patterns() -> list[dict]:
    """The reviewed seed library as validated pattern dicts."""
    return [dict(p) for p in _seed()[1]]


def _load_seed(con: duckdb.DuckDBPyConnection) -> None:
    """Insert new seed patterns; refresh seed patterns that nobody changed locally."""
    now = _now()
    for p in _seed()[1]:
        row = con.execute(
            "SELECT origin, locally_modified FROM patterns WHERE id = ?", [p["id"]]
        ).fetchone()
        if row is None:
            _insert_pattern(con, p, origin="seed", now=now)
        elif row[0] == "seed" and not row[1]:
            _write_pattern_fields(con, p["id"], p, now=now, mark_modified=False)
    _set_meta(con, "seed_hash", _seed_hash())


# --- patterns -----------------------------------------------------------------------------


def slugify(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60].strip("-")
    return s if len(s) >= 2 else f"pattern-{s}".strip("-")


def _str_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int) for v in value):
        raise KBError(f"pattern field {field!r} must be a list of strings")
    out: list[str] = []
    for v in value:
        s = str(v).strip()
        if s and s not in out:
            out.append(s)
    return out


def validate_pattern(p: dict) -> dict:
    """Normalise a pattern dict and reject anything that would corrupt the library."""
    if not isinstance(p, dict):
        raise KBError("a pattern must be a mapping")
    pid = str(p.get("id", "")).strip()
    if not _ID_RE.match(pid):
        raise KBError(f"invalid pattern id {pid!r}: use a lower-case slug like 'gpu-xid79-fallen-off-bus'")
    title = str(p.get("title", "")).strip()
    if not title:
        raise KBError(f"pattern {pid}: title is required")
    category = str(p.get("category", "")).strip().lower()
    if category not in CATEGORIES:
        raise KBError(f"pattern {pid}: category must be one of {', '.join(CATEGORIES)}, got {category!r}")
    kind = str(p.get("kind", "cause") or "cause").strip().lower()
    if kind not in KINDS:
        raise KBError(f"pattern {pid}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    out = {
        "id": pid,
        "title": title,
        "category": category,
        "kind": kind,
        "description": str(p.get("description", "") or "").strip(),
        "action": str(p.get("action", "") or "").strip(),
        "indicators": _str_list(p.get("indicators"), "indicators"),
        "codes": _str_list(p.get("codes"), "codes"),
        "sources": _str_list(p.get("sources"), "sources"),
        "requires_code": bool(p.get("requires_code", False)),
    }
    if out["requires_code"] and not out["codes"]:
        raise KBError(f"pattern {pid}: requires_code needs at least one entry in codes")
    return out


def _insert_pattern(con, p: dict, *, origin: str, now: datetime, extra: dict | None = None) -> None:
    extra = extra or {}
    con.execute(
        """INSERT INTO patterns (id, title, category, kind, description, action, indicators,
               codes, sources, requires_code, times_confirmed, origin, locally_modified,
               created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        [
            p["id"], p["title"], p["category"], p["kind"], p["description"], p["action"],
            json.dumps(p["indicators"]), json.dumps(p["codes"]), json.dumps(p["sources"]),
            p["requires_code"],
            int(extra.get("times_confirmed", 0)), extra.get("origin", origin),
            bool(extra.get("locally_modified", False)),
            extra.get("created_at") or now, extra.get("updated_at") or now,
        ],
    )


def _write_pattern_fields(con, pid: str, p: dict, *, now: datetime, mark_modified: bool) -> None:
    con.execute(
        """UPDATE patterns SET title = ?, category = ?, kind = ?, description = ?, action = ?,
               indicators = ?, codes = ?, sources = ?, requires_code = ?, updated_at = ?,
               locally_modified = locally_modified OR ?
           WHERE id = ?""",
        [
            p["title"], p["category"], p["kind"], p["description"], p["action"],
            json.dumps(p["indicators"]), json.dumps(p["codes"]), json.dumps(p["sources"]),
            p["requires_code"], now, mark_modified, pid,
        ],
    )


_PATTERN_COLS = (
    "id, title, category, kind, description, action, indicators, codes, sources, requires_code, "
    "times_confirmed, origin, locally_modified, created_at, updated_at"
)


def _pattern_row(row: tuple) -> dict:
    (pid, title, category, kind, description, action, indicators, codes, sources, requires,
     times_confirmed, origin, modified, created, updated) = row
    return {
        "id": pid, "title": title, "category": category, "kind": kind,
        "description": description, "action": action,
        "indicators": json.loads(indicators), "codes": json.loads(codes),
        "sources": json.loads(sources), "requires_code": bool(requires),
        "times_confirmed": int(times_confirmed),
        "origin": origin, "locally_modified": bool(modified),
        "created_at": _iso(created), "updated_at": _iso(updated),
    }


def list_patterns(*, kb: Path | str | None = None, category: str | None = None) -> list[dict]:
    with connect(kb) as con:
        sql = f"SELECT {_PATTERN_COLS} FROM patterns"
        args: list[Any] = []
        if category:
            sql += " WHERE category = ?"
            args.append(category)
        rows = con.execute(sql + " ORDER BY category, id", args).fetchall()
    return [_pattern_row(r) for r in rows]


def get_pattern(pid: str, *, kb: Path | str | None = None) -> dict | None:
    with connect(kb) as con:
        row = con.execute(f"SELECT {_PATTERN_COLS} FROM patterns WHERE id = ?", [pid]).fetchone()
    return _pattern_row(row) if row else None


def add_pattern(pattern: dict, *, kb: Path | str | None = None, origin: str = "sre") -> str:
    p = validate_pattern(pattern)
    with transaction(kb) as con:
        if con.execute("SELECT 1 FROM patterns WHERE id = ?", [p["id"]]).fetchone():
            raise KBError(f"pattern {p['id']} already exists (use 'l4 kb edit')")
        _insert_pattern(con, p, origin=origin, now=_now())
    return p["id"]


def update_pattern(pid: str, changes: dict, *, kb: Path | str | None = None) -> dict:
    """Apply field changes (title, category, kind, description, action, indicators, codes,
    sources); list fields are replaced.  Marks the pattern as locally modified so a later
    seed update does not overwrite the SRE's edit."""
    with transaction(kb) as con:
        row = con.execute(f"SELECT {_PATTERN_COLS} FROM patterns WHERE id = ?", [pid]).fetchone()
        if row is None:
            raise KBError(f"no pattern {pid!r}")
        current = _pattern_row(row)
        allowed = {"title", "category", "kind", "description", "action", "indicators", "codes",
                   "sources", "requires_code"}
        unknown = set(changes) - allowed
        if unknown:
            raise KBError(f"cannot edit pattern field(s) {sorted(unknown)}")
        merged = validate_pattern({**current, **changes, "id": pid})
        _write_pattern_fields(con, pid, merged, now=_now(), mark_modified=True)
    return get_pattern(pid, kb=kb) or merged


def delete_pattern(pid: str, *, kb: Path | str | None = None) -> None:
    with transaction(kb) as con:
        if not con.execute("SELECT 1 FROM patterns WHERE id = ?", [pid]).fetchone():
            raise KBError(f"no pattern {pid!r}")
        con.execute("DELETE FROM pattern_vectors WHERE pattern_id = ?", [pid])
        con.execute("DELETE FROM patterns WHERE id = ?", [pid])


# --- embeddings stored with the patterns --------------------------------------------------


def pattern_texts(p: dict) -> tuple[str, list[str]]:
    """(whole-pattern text, per-indicator texts) that get embedded, already masked."""
    from l4.embed import mask_text

    ind = [mask_text(i) for i in p["indicators"]]
    ind = [t for i, t in enumerate(ind) if t and t not in ind[:i]]
    whole = f"{p['title']}. {p['description']}".strip()
    return whole, ind


def stale_embeddings(*, kb: Path | str | None = None) -> list[dict]:
    """Patterns whose stored vectors do not match their current text."""
    from l4.embed import text_hash

    with connect(kb) as con:
        rows = con.execute(f"SELECT {_PATTERN_COLS}, embed_hash FROM patterns").fetchall()
        vec = con.execute(
            "SELECT pattern_id, list(text_hash ORDER BY idx) FROM pattern_vectors GROUP BY pattern_id"
        ).fetchall()
    have = {pid: hashes for pid, hashes in vec}
    out = []
    for r in rows:
        p = _pattern_row(r[:-1])
        whole, ind = pattern_texts(p)
        if r[-1] != text_hash(whole) or list(have.get(p["id"], [])) != [text_hash(t) for t in ind]:
            p["_whole"], p["_ind"] = whole, ind
            out.append(p)
    return out


def store_embeddings(items: list[tuple[str, str, list[float], list[tuple[str, list[float]]]]],
                     *, kb: Path | str | None = None) -> None:
    """Write (pattern_id, whole_text, whole_vec, [(indicator_text, vec)]) in one transaction."""
    from l4.embed import text_hash

    with transaction(kb) as con:
        for pid, whole, wvec, ind in items:
            if not con.execute("SELECT 1 FROM patterns WHERE id = ?", [pid]).fetchone():
                continue  # deleted meanwhile
            con.execute(
                "UPDATE patterns SET embedding = ?::FLOAT[384], embed_hash = ? WHERE id = ?",
                [wvec, text_hash(whole), pid],
            )
            con.execute("DELETE FROM pattern_vectors WHERE pattern_id = ?", [pid])
            if ind:
                con.executemany(
                    "INSERT INTO pattern_vectors VALUES (?, ?, ?, ?, ?::FLOAT[384])",
                    [(pid, i, t, text_hash(t), v) for i, (t, v) in enumerate(ind)],
                )


# --- embedding cache and category classifier (issue 10 migration) ------------------------


def cached_vectors(keys: list[str], *, kb: Path | str | None = None) -> dict[str, list[float]]:
    """Stored vectors for these cache keys (missing keys are simply absent)."""
    if not keys:
        return {}
    with connect(kb) as con:
        rows = con.execute(
            "SELECT key, embedding FROM embed_cache WHERE key IN (SELECT unnest($k::VARCHAR[]))",
            {"k": list(dict.fromkeys(keys))},
        ).fetchall()
    return {k: v for k, v in rows}


def store_cached_vectors(rows: list[tuple[str, str, list[float]]], *,
                         kb: Path | str | None = None) -> None:
    """Add (key, model, vector) rows; a key another process stored meanwhile is kept."""
    if not rows:
        return
    now = _now()
    with transaction(kb) as con:
        con.executemany(
            "INSERT OR IGNORE INTO embed_cache VALUES (?, ?, ?::FLOAT[384], ?)",
            [(k, m, v, now) for k, m, v in rows],
        )


def category_training_state(*, kb: Path | str | None = None) -> list[tuple]:
    """What the category classifier is trained on, without the vectors (cheap to read).

    One row per pattern (id, category, embed_hash, [indicator text hashes], sources, codes)
    and one per confirmed diagnosis ('diagnosis', id, pattern category); the classifier's
    fingerprint is a hash of these rows, so any library edit or confirmation changes it.
    """
    with connect(kb) as con:
        pats = con.execute(
            """SELECT p.id, p.category, coalesce(p.embed_hash, ''),
                      coalesce((SELECT list(text_hash ORDER BY idx) FROM pattern_vectors v
                                WHERE v.pattern_id = p.id), []),
                      p.sources, p.codes
               FROM patterns p ORDER BY p.id"""
        ).fetchall()
        diags = con.execute(
            """SELECT 'diagnosis', d.id, p.category FROM diagnoses d JOIN patterns p
               ON p.id = d.pattern_id WHERE d.status = 'confirmed' ORDER BY d.id"""
        ).fetchall()
    return [tuple(r) for r in pats] + [tuple(r) for r in diags]


def category_training_rows(*, kb: Path | str | None = None) -> dict:
    """Plain training data of the category classifier.

    ``patterns``: [{id, category, sources, codes, whole: (text, vec), indicators: [(text,
    vec)]}] with the stored vectors; ``confirmed``: [{id, pattern_id, category, texts}] for
    every SRE-confirmed diagnosis (texts as ``indicator_texts`` of its report).
    """
    with connect(kb) as con:
        rows = con.execute(
            f"SELECT {_PATTERN_COLS}, embedding FROM patterns ORDER BY id").fetchall()
        vecs = con.execute(
            "SELECT pattern_id, text, embedding FROM pattern_vectors ORDER BY pattern_id, idx"
        ).fetchall()
        diags = con.execute(
            f"""SELECT {', '.join('d.' + c.strip() for c in _DIAG_COLS.split(','))}, p.category
                FROM diagnoses d JOIN patterns p ON p.id = d.pattern_id
                WHERE d.status = 'confirmed' ORDER BY d.id"""
        ).fetchall()
    by_pid: dict[str, list[tuple[str, list[float]]]] = {}
    for pid, text, vec in vecs:
        by_pid.setdefault(pid, []).append((text, vec))
    patterns = []
    for r in rows:
        p = _pattern_row(r[:-1])
        whole = f"{p['title']}. {p['description']}".strip()
        patterns.append({
            "id": p["id"], "category": p["category"], "sources": p["sources"],
            "codes": p["codes"], "raw_indicators": p["indicators"],
            "whole": (whole, r[-1]), "indicators": by_pid.get(p["id"], []),
        })
    confirmed = []
    for r in diags:
        d = _diag_row(r[:-1])
        confirmed.append({"id": d["id"], "pattern_id": d["pattern_id"], "category": r[-1],
                          "texts": indicator_texts(d["report"])})
    return {"patterns": patterns, "confirmed": confirmed}


def category_descriptions() -> tuple[str, dict[str, list[str]]]:
    """(hash, {category: [description, *phrases]}) from kb/categories.yaml."""
    text = _kb_resource("categories.yaml")
    doc = yaml.load(text, Loader=_YAML_LOADER) or {}  # noqa: S506 - a safe loader
    out: dict[str, list[str]] = {}
    for name, entry in (doc.get("categories") or {}).items():
        if name not in CATEGORIES or not isinstance(entry, dict):
            raise KBError(f"kb/categories.yaml: unknown category {name!r}")
        texts = [str(entry.get("description") or "").strip()] + [str(t).strip() for t in entry.get("phrases") or []]
        out[name] = [t for t in texts if t]
    return hashlib.sha256(text.encode()).hexdigest(), out


def category_exemplars() -> tuple[str, list[dict]]:
    """(hash, [{"source", "category", "lines"}]) from kb/category_exemplars.yaml: real
    failure lines from public reports, each labelled with the category of its report's
    resolution.  They teach the category classifier only (they are not patterns: no
    action, no suggestion), so a wording no pattern uses still finds its team."""
    try:
        text = _kb_resource("category_exemplars.yaml")
    except (FileNotFoundError, OSError):
        return hashlib.sha256(b"").hexdigest(), []
    doc = yaml.load(text, Loader=_YAML_LOADER) or {}  # noqa: S506 - a safe loader
    out: list[dict] = []
    for i, entry in enumerate(doc.get("exemplars") or []):
        if not isinstance(entry, dict) or entry.get("category") not in CATEGORIES:
            raise KBError(f"kb/category_exemplars.yaml: exemplar {i} has no known category")
        lines = [str(t).strip() for t in entry.get("lines") or [] if str(t).strip()]
        source = str(entry.get("source") or "").strip()
        if not lines or not source:
            raise KBError(f"kb/category_exemplars.yaml: exemplar {i} needs a source and lines")
        out.append({"source": source, "category": entry["category"], "lines": lines})
    return hashlib.sha256(text.encode()).hexdigest(), out


def load_category_model(fingerprint: str, *, kb: Path | str | None = None) -> str | None:
    with connect(kb) as con:
        row = con.execute("SELECT model FROM category_models WHERE fingerprint = ?",
                          [fingerprint]).fetchone()
    return row[0] if row else None


def store_category_model(fingerprint: str, model: str, *, kb: Path | str | None = None) -> None:
    """Keep only the newest fitted classifier (older fingerprints are stale by definition)."""
    with transaction(kb) as con:
        con.execute("DELETE FROM category_models")
        con.execute("INSERT INTO category_models VALUES (?, ?, ?)", [fingerprint, model, _now()])


# --- diagnoses ----------------------------------------------------------------------------


def _new_diag_id() -> str:
    return "d" + uuid.uuid4().hex[:10]


def record_diagnosis(report: dict, *, kb: Path | str | None = None) -> str:
    """Store a diagnosis report as pending and return its id.

    A report carrying ``failure_key`` is stored at most once per failure: while a
    diagnosis of that failure is pending, it is updated in place (a retried or forced run,
    or logs that changed) and keeps its id; once an SRE decided it, the same logs return
    the decided diagnosis untouched and changed logs get one new pending diagnosis.  The
    check and the write are one transaction, so two runs racing on one failure store one.
    """
    if not isinstance(report, dict):
        raise KBError("a diagnosis report must be a JSON object")
    try:
        text = json.dumps(report, sort_keys=True, default=str)
    except (TypeError, ValueError) as exc:
        raise KBError(f"the report cannot be stored as JSON: {exc}") from exc
    key = _opt_str(report.get("failure_key"))
    fp = _opt_str(report.get("logs_fingerprint"))
    with transaction(kb) as con:
        if key:
            rows = con.execute(
                "SELECT id, status, logs_fingerprint FROM diagnoses WHERE failure_key = ? "
                "ORDER BY created_at DESC, id DESC", [key]).fetchall()
            pending = [r for r in rows if r[1] == "pending"]
            if pending:
                con.execute("UPDATE diagnoses SET report = ?, logs_fingerprint = ? WHERE id = ?",
                            [text, fp, pending[0][0]])
                return pending[0][0]
            same = [r for r in rows if r[2] == fp]
            if same:
                return same[0][0]
        did = _new_diag_id()
        con.execute(
            "INSERT INTO diagnoses (id, job_id, config_id, created_at, report, status, "
            "failure_key, logs_fingerprint) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
            [did, _opt_str(report.get("job_id")), _opt_str(report.get("config_id")), _now(),
             text, key, fp],
        )
    return did


def find_diagnosis(failure_key: str, *, kb: Path | str | None = None) -> dict | None:
    """The newest diagnosis stored for this failure (see :func:`record_diagnosis`), or None."""
    with connect(kb) as con:
        row = con.execute(
            f"SELECT {_DIAG_COLS} FROM diagnoses WHERE failure_key = ? "
            "ORDER BY (status = 'pending') DESC, created_at DESC, id DESC LIMIT 1",
            [failure_key]).fetchone()
    return _diag_row(row) if row else None


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


_DIAG_COLS = ("id, job_id, config_id, created_at, report, status, decided_by, decided_at, "
              "pattern_id, reason, failure_key, logs_fingerprint")


def _diag_row(row: tuple) -> dict:
    did, job, cfg, created, report, status, by, at, pid, reason, key, fp = row
    return {
        "id": did, "job_id": job, "config_id": cfg, "created_at": _iso(created),
        "status": status, "decided_by": by, "decided_at": _iso(at),
        "pattern_id": pid, "reason": reason, "report": json.loads(report),
        "failure_key": key, "logs_fingerprint": fp,
    }


def get_diagnosis(id: str, *, kb: Path | str | None = None) -> dict | None:
    """The diagnosis with this id (a unique prefix is accepted), or None."""
    with connect(kb) as con:
        row = con.execute(f"SELECT {_DIAG_COLS} FROM diagnoses WHERE id = ?", [id]).fetchone()
        if row is None and id:
            rows = con.execute(
                f"SELECT {_DIAG_COLS} FROM diagnoses WHERE starts_with(id, ?) LIMIT 2", [id]
            ).fetchall()
            if len(rows) > 1:
                raise KBError(f"diagnosis id prefix {id!r} is ambiguous")
            row = rows[0] if rows else None
    return _diag_row(row) if row else None


def list_diagnoses(status: str | None = None, *, kb: Path | str | None = None) -> list[dict]:
    """Diagnoses newest first, optionally only one status."""
    if status is not None and status not in STATUSES:
        raise KBError(f"status must be one of {', '.join(STATUSES)}")
    with connect(kb) as con:
        sql = f"SELECT {_DIAG_COLS} FROM diagnoses"
        args: list[Any] = []
        if status:
            sql += " WHERE status = ?"
            args.append(status)
        rows = con.execute(sql + " ORDER BY created_at DESC, id DESC", args).fetchall()
    return [_diag_row(r) for r in rows]


def _who(by: str | None) -> str:
    if by:
        return by
    for var in ("L4_USER", "USER", "LOGNAME"):
        if os.environ.get(var):
            return os.environ[var]
    return "unknown"


def indicator_texts(report: dict, limit: int = 5) -> list[str]:
    """Message texts of a report's top events that become a pattern's new indicators.

    One example text per event (the template when no example is present), in report
    order, which is most suspicious first.
    """
    out: list[str] = []
    for ev in (report.get("events") or [])[:limit]:
        if not isinstance(ev, dict):
            continue
        examples = ev.get("examples") or []
        text = ""
        if examples and isinstance(examples[0], dict):
            text = str(examples[0].get("text") or "")
        text = text or str(ev.get("template") or "")
        text = text.strip()[:500]
        if text and text not in out:
            out.append(text)
    return out


def confirm_diagnosis(
    diag_id: str,
    *,
    pattern_id: str | None = None,
    new_pattern: dict | None = None,
    by: str | None = None,
    kb: Path | str | None = None,
) -> str:
    """Confirm a diagnosis against an existing pattern or a new one; returns the pattern id.

    The diagnosis' indicator events are added to the pattern (so its vectors become stale
    and are re-embedded), times_confirmed is incremented and the diagnosis is marked
    confirmed — all in one transaction.
    """
    if (pattern_id is None) == (new_pattern is None):
        raise KBError("confirm needs exactly one of --pattern PID or --new")
    with transaction(kb) as con:
        row = con.execute(f"SELECT {_DIAG_COLS} FROM diagnoses WHERE id = ?", [diag_id]).fetchone()
        if row is None:
            raise KBError(f"no diagnosis {diag_id!r}")
        diag = _diag_row(row)
        texts = indicator_texts(diag["report"])
        now = _now()
        if new_pattern is not None:
            p = dict(new_pattern)
            base = p.get("id") or slugify(str(p.get("title", "")))
            pid = base
            n = 2
            while con.execute("SELECT 1 FROM patterns WHERE id = ?", [pid]).fetchone():
                if p.get("id"):
                    raise KBError(f"pattern {pid} already exists")
                pid, n = f"{base}-{n}", n + 1
            p["id"] = pid
            p["indicators"] = list(p.get("indicators") or []) + texts
            if not p.get("description"):
                p["description"] = f"Confirmed from diagnosis {diag_id} (job {diag['job_id']})."
            p = validate_pattern(p)
            if not p["indicators"]:
                raise KBError(f"diagnosis {diag_id} has no events to learn the new pattern from")
            _insert_pattern(con, p, origin="sre", now=now, extra={"times_confirmed": 1})
        else:
            prow = con.execute(f"SELECT {_PATTERN_COLS} FROM patterns WHERE id = ?", [pattern_id]).fetchone()
            if prow is None:
                raise KBError(f"no pattern {pattern_id!r} (see 'l4 kb list')")
            p = _pattern_row(prow)
            pid = p["id"]
            merged = validate_pattern({**p, "indicators": p["indicators"] + texts})
            _write_pattern_fields(con, pid, merged, now=now, mark_modified=bool(texts))
            con.execute("UPDATE patterns SET times_confirmed = times_confirmed + 1 WHERE id = ?", [pid])
        con.execute(
            "UPDATE diagnoses SET status = 'confirmed', decided_by = ?, decided_at = ?, "
            "pattern_id = ?, reason = NULL WHERE id = ?",
            [_who(by), now, pid, diag_id],
        )
    return pid


def reject_diagnosis(diag_id: str, *, reason: str, by: str | None = None,
                     kb: Path | str | None = None) -> None:
    if not reason or not reason.strip():
        raise KBError("a rejection needs a --reason")
    with transaction(kb) as con:
        if not con.execute("SELECT 1 FROM diagnoses WHERE id = ?", [diag_id]).fetchone():
            raise KBError(f"no diagnosis {diag_id!r}")
        con.execute(
            "UPDATE diagnoses SET status = 'rejected', decided_by = ?, decided_at = ?, "
            "pattern_id = NULL, reason = ? WHERE id = ?",
            [_who(by), _now(), reason.strip(), diag_id],
        )


# --- normal-event pools -------------------------------------------------------------------


def _normal_row(row: dict) -> tuple:
    try:
        base = (
            str(row["template"]), int(row["total_count"]), int(row["n_nodes_with"]),
            int(row["n_nodes"]), int(row["max_per_node"]), int(row["lines_total"]),
        )
        place, share = row.get("place"), row.get("share")
        phases = (
            _opt_str(row.get("phase")), None if place is None else float(place),
            _opt_str(row.get("stage")), _opt_str(row.get("named")),
            None if share is None else float(share),
            None if row.get("counter") is None else bool(row.get("counter")),
            None if row.get("first_count") is None else float(row.get("first_count")),
            None if row.get("pace_first") is None else float(row.get("pace_first")),
            None if row.get("pace_step") is None else float(row.get("pace_step")),
            _opt_str(row.get("pace_anchor")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise KBError(f"invalid normal-pool row {row!r}: needs {', '.join(_NORMAL_FIELDS)}") from exc
    return base + phases


def _opt_str(v) -> str | None:
    return None if v is None else str(v)


_NORMAL_INSERT = (
    f"INSERT INTO normal_rows (config_id, job_id, {', '.join(_NORMAL_FIELDS)}, "
    f"{', '.join(_PHASE_FIELDS)}, added_at) "
    f"VALUES ({', '.join('?' * (3 + len(_NORMAL_FIELDS) + len(_PHASE_FIELDS)))})"
)


def add_normal_job(config_id: str, job_id: str, rows: list[dict], *,
                   kb: Path | str | None = None) -> None:
    """Add (or replace) one successful job's event rows in the pool of its configuration."""
    if not config_id or not job_id:
        raise KBError("config_id and job_id are required for the normal pool")
    values = [(config_id, job_id, *_normal_row(r)) for r in rows]
    with transaction(kb) as con:
        con.execute("DELETE FROM normal_rows WHERE config_id = ? AND job_id = ?", [config_id, job_id])
        if values:
            now = _now()
            con.executemany(_NORMAL_INSERT, [(*v, now) for v in values])


def load_normal_rows(config_id: str, *, kb: Path | str | None = None) -> list[dict]:
    with connect(kb) as con:
        rows = con.execute(
            f"SELECT job_id, {', '.join(_NORMAL_FIELDS + _PHASE_FIELDS)} FROM normal_rows "
            "WHERE config_id = ? ORDER BY job_id, template",
            [config_id],
        ).fetchall()
    return [{"job_id": r[0], **dict(zip(_NORMAL_FIELDS + _PHASE_FIELDS, r[1:], strict=True))}
            for r in rows]


# --- export / import ----------------------------------------------------------------------


def export_kb(*, kb: Path | str | None = None) -> dict:
    """Everything an SRE wrote, as plain JSON (vectors are derived and left out)."""
    with connect(kb) as con:
        pats = [_pattern_row(r) for r in con.execute(
            f"SELECT {_PATTERN_COLS} FROM patterns ORDER BY id").fetchall()]
        diags = [_diag_row(r) for r in con.execute(
            f"SELECT {_DIAG_COLS} FROM diagnoses ORDER BY id").fetchall()]
        normal = con.execute(
            f"SELECT config_id, job_id, {', '.join(_NORMAL_FIELDS)}, added_at, "
            f"{', '.join(_PHASE_FIELDS)} FROM normal_rows ORDER BY config_id, job_id, template"
        ).fetchall()
        version = int(_meta(con, "schema_version") or SCHEMA_VERSION)
    return {
        "format": EXPORT_FORMAT,
        "schema_version": version,
        "patterns": pats,
        "diagnoses": diags,
        "normal_rows": [
            {"config_id": r[0], "job_id": r[1], **dict(zip(_NORMAL_FIELDS, r[2:8], strict=True)),
             "added_at": _iso(r[8]), **dict(zip(_PHASE_FIELDS, r[9:], strict=True))}
            for r in normal
        ],
    }


def import_kb(doc: dict, *, kb: Path | str | None = None, replace: bool = False) -> dict:
    """Load an export: rows with the same id are replaced, others kept (all or nothing).

    With replace=True the knowledge base is emptied first, so the result equals the
    export exactly.  Returns counts of what was written.
    """
    if not isinstance(doc, dict) or doc.get("format") != EXPORT_FORMAT:
        raise KBError(f"not an l4 knowledge-base export (expected format {EXPORT_FORMAT!r})")
    if int(doc.get("schema_version", 0)) > SCHEMA_VERSION:
        raise KBError("the export comes from a newer l4; upgrade l4 to import it")
    pats = []
    for raw in doc.get("patterns") or []:
        p = validate_pattern(raw)
        extra = {
            "times_confirmed": int(raw.get("times_confirmed", 0) or 0),
            "origin": str(raw.get("origin") or "import"),
            "locally_modified": bool(raw.get("locally_modified", False)),
            "created_at": _parse_ts(raw.get("created_at")),
            "updated_at": _parse_ts(raw.get("updated_at")),
        }
        pats.append((p, extra))
    diags = []
    for d in doc.get("diagnoses") or []:
        if not isinstance(d, dict) or not d.get("id") or not isinstance(d.get("report"), dict):
            raise KBError(f"invalid diagnosis in export: {str(d)[:80]}")
        if d.get("status", "pending") not in STATUSES:
            raise KBError(f"diagnosis {d['id']}: invalid status {d.get('status')!r}")
        diags.append(d)
    normal = [(str(r["config_id"]), str(r["job_id"]), *_normal_row(r), _parse_ts(r.get("added_at")))
              for r in doc.get("normal_rows") or [] if isinstance(r, dict) and "config_id" in r]
    now = _now()
    with transaction(kb) as con:
        if replace:
            for t in ("pattern_vectors", "patterns", "diagnoses", "normal_rows"):
                con.execute(f"DELETE FROM {t}")
        for p, extra in pats:
            con.execute("DELETE FROM pattern_vectors WHERE pattern_id = ?", [p["id"]])
            con.execute("DELETE FROM patterns WHERE id = ?", [p["id"]])
            _insert_pattern(con, p, origin="import", now=now, extra=extra)
        for d in diags:
            con.execute("DELETE FROM diagnoses WHERE id = ?", [d["id"]])
            con.execute(
                f"INSERT INTO diagnoses ({_DIAG_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    str(d["id"]), _opt_str(d.get("job_id")), _opt_str(d.get("config_id")),
                    _parse_ts(d.get("created_at")) or now,
                    json.dumps(d["report"], sort_keys=True, default=str),
                    d.get("status", "pending"), d.get("decided_by"), _parse_ts(d.get("decided_at")),
                    d.get("pattern_id"), d.get("reason"),
                    _opt_str(d.get("failure_key") or d["report"].get("failure_key")),
                    _opt_str(d.get("logs_fingerprint") or d["report"].get("logs_fingerprint")),
                ],
            )
        for key in {(r[0], r[1]) for r in normal}:
            con.execute("DELETE FROM normal_rows WHERE config_id = ? AND job_id = ?", list(key))
        if normal:
            con.executemany(
                _NORMAL_INSERT,
                [(*r[:-1], r[-1] or now) for r in normal],
            )
    return {"patterns": len(pats), "diagnoses": len(diags), "normal_rows": len(normal)}



# --- durability: backup and check -----------------------------------------------------------

_TABLES = ("kb_meta", "patterns", "pattern_vectors", "diagnoses", "normal_rows")


def backup_kb(dest: Path | str, *, kb: Path | str | None = None) -> dict:
    """Copy the knowledge base to ``dest`` as one consistent, checked DuckDB file.

    The source is checkpointed and copied while this process holds it (no writer can
    interleave), the copy goes to a temporary file next to ``dest``, is fsynced, checked
    with :func:`check_kb` and only then renamed over ``dest``: a full disk or a crash
    never leaves a half-written backup under that name.
    """
    import shutil

    path = resolve_kb(kb)
    dest = Path(dest).expanduser()
    if dest.resolve() == path.resolve():
        raise KBError(f"the backup must not be the knowledge base itself ({path})")
    if dest.is_dir():
        raise KBError(f"{dest} is a directory; give the backup's file name")
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    with connect(path) as con:
        con.execute("CHECKPOINT")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
        except OSError as exc:
            with suppress(OSError):
                tmp.unlink()
            raise KBError(f"cannot write the backup {dest}: {exc.strerror or exc}; "
                          "nothing was replaced") from exc
    try:
        report = check_kb(kb=tmp)
        if not report["ok"]:
            raise KBError(f"the backup did not check out ({'; '.join(report['problems'])}); "
                          f"{dest} was not written")
        os.replace(tmp, dest)
    finally:
        with suppress(OSError):
            tmp.unlink()
        with suppress(OSError):
            Path(str(tmp) + ".wal").unlink()
    report["backup"] = str(dest)
    return report


def check_kb(*, kb: Path | str | None = None) -> dict:
    """Read every row of every table; report counts and problems (never modifies a file
    that is not already an l4 knowledge base).

    DuckDB verifies a checksum for every block it reads, so reading everything finds a
    damaged file; each stored report must also parse as JSON.
    """
    path = resolve_kb(kb)
    if not path.exists():
        raise KBError(f"no knowledge base at {path}")
    problems: list[str] = []
    counts: dict[str, int] = {}
    version = None
    try:
        with connect(path) as con:
            version = int(_meta(con, "schema_version") or 0)
            missing = set(_TABLES) - _tables(con)
            if missing:
                problems.append(f"missing tables {sorted(missing)}")
            for t in _TABLES:
                if t in missing:
                    continue
                rows = con.execute(f"SELECT * FROM {t}").fetchall()
                counts[t] = len(rows)
            for did, text in con.execute("SELECT id, report FROM diagnoses").fetchall():
                try:
                    json.loads(text)
                except ValueError:
                    problems.append(f"diagnosis {did}: stored report is not JSON")
            bad = con.execute("SELECT count(*) FROM patterns WHERE embedding IS NOT NULL "
                              "AND len(embedding) != 384").fetchone()[0]
            if bad:
                problems.append(f"{bad} pattern embedding(s) of the wrong size")
    except KBError as exc:
        problems.append(str(exc))
    return {"kb": str(path), "ok": not problems, "schema_version": version, "counts": counts,
            "problems": problems}
