"""The PostgreSQL saver's tables (schema version 2) and server-side functions.

The functions raise SQLSTATE ``TL409`` when a put lost its compare-and-set and ``TL410`` when values
a checkpoint relies on are not stored; ``connections.map_error`` turns them into exceptions.
"""

from __future__ import annotations

SCHEMA_VERSION = 2
#: ``MIGRATIONS[n]``: the statements (templates over ``statements.Queries.names``) that turn
#: tables of version ``n`` into version ``n + 1``, run by ``setup`` in its transaction before
#: the (idempotent) DDL below; see ``formats``. None yet: version 1 (the loop's metadata stored
#: as bytes) is refused.
MIGRATIONS: dict[int, tuple[str, ...]] = {}

CAS_SQLSTATE = "TL409"  # raised by threadline_advance_head when the head moved
REFS_SQLSTATE = "TL410"  # raised by threadline_check_refs when values are not stored
MISSING_SQLSTATES = {"42P01", "42883", "3F000"}  # undefined table / function, no such schema


DDL_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {version} (
    version integer NOT NULL
)
"""

# ``blobs.src_*``: a blob whose bytes are inside a write of the same thread (the run's input, as
# the ``__start__`` task's result) keeps only their header in ``data`` and says where the rest
# is: bytes ``src_at`` (0-based) to ``src_at + src_len`` of the ``result`` write of task
# ``src_task`` at checkpoint ``src_id``. Loads append them (``BLOB_DATA``); a prune that drops
# that write copies them into the row first.
#
# Compact rows (a checkpoint that only bumps a counter: ~195 bytes of ``checkpoints`` with its
# key's index, its ``metadata`` empty: ``bodies.encode_metadata``): ``heads`` has no index on
# ``updated_at`` (``list_threads`` sorts the root heads, one a thread), so a put's update of the
# head is HOT and leaves no index entries behind. In ``checkpoints``, ``parent_id`` is NULL
# when the parent is the previous checkpoint of the namespace (a put that is no fork: its
# parent was the head), '' when there is none; a prune
# that deletes a checkpoint writes its id into the row that named it so. ``blob_keys`` and
# ``blob_versions`` are NULL when no value lives in a blob; ``created_raw`` holds
# ``created_at`` only when the ``timestamptz`` does not spell it back (``rows.created_fields``).
# The fixed-width columns come first (no padding), and the key's index fills its pages.
DDL = (
    """
CREATE TABLE IF NOT EXISTS {heads} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    head          text COLLATE "C",
    next          text[]      NOT NULL DEFAULT '{{}}',
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns)
) WITH (fillfactor = 70)
""",
    """
CREATE TABLE IF NOT EXISTS {cps} (
    created_at    timestamptz,
    step          integer     NOT NULL,
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    parent_id     text COLLATE "C",
    created_raw   text,
    body          bytea       NOT NULL,
    metadata      bytea       NOT NULL,
    blob_keys     text[] COLLATE "C",
    blob_versions text[] COLLATE "C",
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id) WITH (fillfactor = 100)
)
""",
    """
CREATE TABLE IF NOT EXISTS {blobs} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    version       text COLLATE "C" NOT NULL,
    start         text COLLATE "C" NOT NULL,
    base          text COLLATE "C",
    chain_bytes   bigint NOT NULL,
    full_bytes    bigint NOT NULL,
    crc32         bigint NOT NULL,
    data          bytea  NOT NULL,
    items         bigint,
    src_id        text COLLATE "C",
    src_task      text COLLATE "C",
    src_at        integer,
    src_len       integer,
    PRIMARY KEY (thread_id, checkpoint_ns, key, version)
)
""",
    """
CREATE TABLE IF NOT EXISTS {writes} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    task_name     text   NOT NULL,
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    data          bytea  NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, kind)
)
""",
    # The compare-and-set of ``put`` (``rules.check_put`` in SQL): move the head only from
    # the expected parent (from anywhere, for a fork), and only forward: the new id must sort
    # after the head. A missing head row is created, if the checkpoint may start the thread
    # (no parent, or a fork). The UPDATE row-locks the head until the transaction ends, so puts
    # on one (thread, namespace) serialise here and nowhere else.
    """
CREATE OR REPLACE FUNCTION {advance}(
    p_thread text, p_ns text, p_parent text, p_new text, p_fork boolean, p_next text[]
) RETURNS void LANGUAGE plpgsql AS $threadline$
DECLARE
    v_actual text;
BEGIN
    FOR attempt IN 1..2 LOOP
        UPDATE {heads} AS h
           SET head = p_new, next = p_next,
               updated_at = CASE WHEN p_ns = '' THEN clock_timestamp() ELSE h.updated_at END
         WHERE h.thread_id = p_thread AND h.checkpoint_ns = p_ns
           AND (p_fork OR h.head IS NOT DISTINCT FROM p_parent)
           AND (h.head IS NULL OR p_new > h.head);
        IF FOUND THEN
            RETURN;
        END IF;
        EXIT WHEN attempt = 2 OR NOT (p_fork OR p_parent IS NULL);
        -- No row moved: create it, unless another put did so meanwhile (then compare again).
        INSERT INTO {heads} (thread_id, checkpoint_ns, head, next, updated_at)
        VALUES (p_thread, p_ns, p_new, p_next, clock_timestamp())
        ON CONFLICT (thread_id, checkpoint_ns) DO NOTHING;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
    SELECT h.head INTO v_actual FROM {heads} AS h
     WHERE h.thread_id = p_thread AND h.checkpoint_ns = p_ns;
    RAISE EXCEPTION 'threadline: thread moved on since the checkpoint was computed'
        USING ERRCODE = 'TL409', DETAIL = json_build_object('actual', v_actual)::text;
END
$threadline$
""",
    # Run last in ``put``: every value of the new checkpoint must be stored, and every delta it
    # uses must still have its base (a value the hints called unchanged, or a base a stale cache
    # vouched for, may be gone). If not, it raises (SQLSTATE ``TL410``) with the keys, and the
    # put is retried once with those values stored in full.
    """
CREATE OR REPLACE FUNCTION {check_refs}(
    p_thread text, p_ns text, p_keys text[], p_versions text[]
) RETURNS void LANGUAGE plpgsql AS $threadline$
DECLARE
    v_missing text[] := '{{}}';
    v_base text;
BEGIN
    -- A primary-key lookup per value (and its base): statements this simple keep one cached
    -- plan per session, where one query over the arrays was planned again at every put
    -- (~200 us) and, as a generic plan, once hashed every blob of the thread.
    FOR i IN 1 .. coalesce(array_length(p_keys, 1), 0) LOOP
        SELECT b.base INTO v_base FROM {blobs} b
         WHERE b.thread_id = p_thread AND b.checkpoint_ns = p_ns
           AND b.key = p_keys[i] AND b.version = p_versions[i];
        IF NOT FOUND OR (v_base IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM {blobs} a
                WHERE a.thread_id = p_thread AND a.checkpoint_ns = p_ns
                  AND a.key = p_keys[i] AND a.version = v_base)) THEN
            v_missing := v_missing || p_keys[i];
        END IF;
    END LOOP;
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'threadline: values of the checkpoint are not stored'
            USING ERRCODE = 'TL410',
                  DETAIL = array_to_json(ARRAY(SELECT DISTINCT k FROM unnest(v_missing) k))::text;
    END IF;
END
$threadline$
""",
    # ``put`` in one statement (so, in autocommit, one transaction and one round trip): move
    # the head, insert the row, its new blobs and its pending writes, then check that every
    # value it names and did not store in full is stored. Any exception undoes all of it.
    # Two parameters: ``p`` holds everything but bytes, as JSON: ``{"thread", "ns", "cid",
    # "parent", "fork", "step", "ts" (the time, or null), "raw" (``created_at`` as given when
    # the time does not spell it: ``rows.created_fields``), "o", "body": [off, len], "meta":
    # [off, len], "next": [name], "refs": [[key, version]], "check": [[key, version]], "blobs":
    # [[key, version, start, base, chain_bytes, full_bytes, crc32, items, src_id, src_task,
    # src_at, src_len, off, len]], "writes": [[task_id, kind, task_name, off, len]], "prefixes":
    # [[key, version, target, full_bytes, items]]}``; ``p_data`` holds the bytes, each piece at
    # ``o + off``. (A JSON text and one ``bytea`` cost the client far less to send than a dozen
    # typed parameters, arrays above all: psycopg adapts those element by element in Python.)
    # ``prefixes`` (compaction) turn stored versions into prefix rows of a blob inserted above;
    # they are tiny, so the rewrite leaves little behind.
    """
CREATE OR REPLACE FUNCTION {put}(p jsonb, p_data bytea) RETURNS void
LANGUAGE plpgsql AS $threadline$
DECLARE
    v_thread text := p->>'thread';
    v_ns text := p->>'ns';
    v_cid text := p->>'cid';
    v_parent text := p->>'parent';
    v_o integer := (p->>'o')::integer;
BEGIN
    PERFORM {advance}(v_thread, v_ns, v_parent, v_cid, (p->>'fork')::boolean,
                      ARRAY(SELECT n FROM jsonb_array_elements_text(p->'next')
                                WITH ORDINALITY AS x(n, i) ORDER BY i));
    -- Never an upsert: the head's compare-and-set guarantees the id is new.
    INSERT INTO {cps} (
        thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, created_raw,
        body, metadata, blob_keys, blob_versions
    ) VALUES (
        v_thread, v_ns, v_cid,
        CASE WHEN v_parent IS NOT NULL AND NOT (p->>'fork')::boolean THEN NULL
             ELSE coalesce(v_parent, '') END,
        (p->>'step')::integer,
        (p->>'ts')::timestamptz, p->>'raw',
        substring(p_data FROM v_o + (p->'body'->>0)::integer + 1
                         FOR (p->'body'->>1)::integer),
        substring(p_data FROM v_o + (p->'meta'->>0)::integer + 1
                         FOR (p->'meta'->>1)::integer),
        CASE WHEN jsonb_array_length(p->'refs') > 0 THEN
            ARRAY(SELECT r->>0 FROM jsonb_array_elements(p->'refs')
                         WITH ORDINALITY AS x(r, i) ORDER BY i) END,
        CASE WHEN jsonb_array_length(p->'refs') > 0 THEN
            ARRAY(SELECT r->>1 FROM jsonb_array_elements(p->'refs')
                         WITH ORDINALITY AS x(r, i) ORDER BY i) END
    );
    IF jsonb_array_length(p->'blobs') > 0 THEN
        -- A (key, version) stored already holds the same value (perhaps as a prefix row).
        INSERT INTO {blobs} (
            thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes,
            crc32, data, items, src_id, src_task, src_at, src_len
        )
        SELECT v_thread, v_ns, b->>0, b->>1, b->>2, b->>3, (b->>4)::bigint, (b->>5)::bigint,
               (b->>6)::bigint,
               substring(p_data FROM v_o + (b->>12)::integer + 1 FOR (b->>13)::integer),
               (b->>7)::bigint, b->>8, b->>9, (b->>10)::integer, (b->>11)::integer
          FROM jsonb_array_elements(p->'blobs') AS x(b)
        ON CONFLICT (thread_id, checkpoint_ns, key, version) DO NOTHING;
    END IF;
    IF jsonb_array_length(p->'prefixes') > 0 THEN
        UPDATE {blobs} AS b
           SET start = r->>2, base = r->>2, chain_bytes = 0, full_bytes = (r->>3)::bigint,
               crc32 = 0, data = ''::bytea, items = (r->>4)::bigint
          FROM jsonb_array_elements(p->'prefixes') AS x(r)
         WHERE b.thread_id = v_thread AND b.checkpoint_ns = v_ns
           AND b.key = r->>0 AND b.version = r->>1;
    END IF;
    IF jsonb_array_length(p->'check') > 0 THEN
        PERFORM {check_refs}(
            v_thread, v_ns,
            ARRAY(SELECT r->>0 FROM jsonb_array_elements(p->'check')
                    WITH ORDINALITY AS x(r, i) ORDER BY i),
            ARRAY(SELECT r->>1 FROM jsonb_array_elements(p->'check')
                    WITH ORDINALITY AS x(r, i) ORDER BY i));
    END IF;
    IF jsonb_array_length(p->'writes') > 0 THEN
        INSERT INTO {writes} (
            thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data
        )
        SELECT v_thread, v_ns, v_cid, w->>0, w->>1, w->>2,
               substring(p_data FROM v_o + (w->>3)::integer + 1 FOR (w->>4)::integer)
          FROM jsonb_array_elements(p->'writes') WITH ORDINALITY AS x(w, i)
         ORDER BY i
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, kind) DO UPDATE SET
            task_name = excluded.task_name,
            data = excluded.data;
    END IF;
END
$threadline$
""",
    # Puts of many threads in one statement (``PostgresSaver.aput`` under concurrency): one round
    # trip and one commit for all. ``p_puts`` is a JSON array of ``put``'s ``p``, each with its
    # own ``o`` into the shared ``p_data``. Each runs in its own subtransaction, so one that loses
    # its compare-and-set (``TL409``) or misses values (``TL410``) is undone alone and reported
    # in its row; any other error fails them all.
    """
CREATE OR REPLACE FUNCTION {put_many}(p_puts jsonb, p_data bytea)
RETURNS TABLE (state text, detail text) LANGUAGE plpgsql AS $threadline$
DECLARE
    v_put jsonb;
BEGIN
    FOR v_put IN SELECT x.p FROM jsonb_array_elements(p_puts) WITH ORDINALITY AS x(p, i)
                  ORDER BY x.i LOOP
        state := NULL;
        detail := NULL;
        BEGIN
            PERFORM {put}(v_put, p_data);
        EXCEPTION WHEN SQLSTATE 'TL409' OR SQLSTATE 'TL410' THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
        END;
        RETURN NEXT;
    END LOOP;
END
$threadline$
""",
)
