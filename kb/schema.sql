-- l4 fault knowledge base, schema version 1.
--
-- Applied by l4.kbstore.migrate() inside one transaction on a fresh file; later
-- versions append numbered migrations in l4/kbstore.py (MIGRATIONS), never edit this
-- file in place once released.  Statements are separated by lines holding only ';;'
-- so that the splitter does not have to parse SQL.

CREATE TABLE IF NOT EXISTS kb_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
;;
-- One row per fault pattern.  indicators/codes/sources are JSON arrays of strings;
-- embedding is the sentence embedding of embed_text(pattern), embed_hash the sha256 of
-- that text, so a changed pattern is re-embedded and an unchanged one never is.
CREATE TABLE IF NOT EXISTS patterns (
    id               VARCHAR PRIMARY KEY,
    title            VARCHAR NOT NULL,
    category         VARCHAR NOT NULL CHECK (category IN ('hardware', 'user', 'platform', 'framework')),
    kind             VARCHAR NOT NULL DEFAULT 'cause' CHECK (kind IN ('cause', 'symptom')),
    description      VARCHAR NOT NULL DEFAULT '',
    action           VARCHAR NOT NULL DEFAULT '',
    indicators       VARCHAR NOT NULL DEFAULT '[]',
    codes            VARCHAR NOT NULL DEFAULT '[]',
    sources          VARCHAR NOT NULL DEFAULT '[]',
    -- TRUE: only suggested when one of its codes is present (faults whose messages look
    -- like normal lines, e.g. a NaN in an otherwise ordinary iteration line).
    requires_code    BOOLEAN NOT NULL DEFAULT FALSE,
    embedding        FLOAT[384],
    embed_hash       VARCHAR,
    times_confirmed  INTEGER NOT NULL DEFAULT 0,
    origin           VARCHAR NOT NULL DEFAULT 'sre',
    locally_modified BOOLEAN NOT NULL DEFAULT FALSE,
    created_at       TIMESTAMP NOT NULL,
    updated_at       TIMESTAMP NOT NULL
);
;;
-- One embedding per indicator of a pattern: matching takes the best indicator, so a
-- pattern with many textual variants is found by any of them.
CREATE TABLE IF NOT EXISTS pattern_vectors (
    pattern_id VARCHAR NOT NULL,
    idx        INTEGER NOT NULL,
    text       VARCHAR NOT NULL,
    text_hash  VARCHAR NOT NULL,
    embedding  FLOAT[384] NOT NULL
);
;;
CREATE TABLE IF NOT EXISTS diagnoses (
    id          VARCHAR PRIMARY KEY,
    job_id      VARCHAR,
    config_id   VARCHAR,
    created_at  TIMESTAMP NOT NULL,
    report      VARCHAR NOT NULL,
    status      VARCHAR NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'confirmed', 'rejected')),
    decided_by  VARCHAR,
    decided_at  TIMESTAMP,
    pattern_id  VARCHAR,
    reason      VARCHAR
);
;;
-- Normal-event pools for the cross-job filter: per configuration, per successful job,
-- one row per event template (see l4.crossjob.normal_rows).
CREATE TABLE IF NOT EXISTS normal_rows (
    config_id    VARCHAR NOT NULL,
    job_id       VARCHAR NOT NULL,
    template     VARCHAR NOT NULL,
    total_count  BIGINT NOT NULL,
    n_nodes_with INTEGER NOT NULL,
    n_nodes      INTEGER NOT NULL,
    max_per_node BIGINT NOT NULL,
    lines_total  BIGINT NOT NULL,
    added_at     TIMESTAMP NOT NULL
);
