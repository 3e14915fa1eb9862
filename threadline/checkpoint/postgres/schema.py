"""The PostgreSQL saver's tables and server-side functions, and ``setup``'s migrations.

Version 1 had the tables; version 2 added ``threadline_put`` (``put`` in one statement);
version 3 added ``blobs.items`` (a list's length) and compaction's prefix rows to the put;
version 4 the ``blobs.src_*`` columns of a value whose bytes are inside a write. The
functions raise SQLSTATE ``TL409`` when a put lost its compare-and-set and ``TL410`` when values
a checkpoint relies on are not stored; ``connections.map_error`` turns them into exceptions.
"""

from __future__ import annotations

SCHEMA_VERSION = 4

CAS_SQLSTATE = "TL409"  # raised by threadline_advance_head when the head moved
REFS_SQLSTATE = "TL410"  # raised by threadline_check_refs when values are not stored
MISSING_SQLSTATES = {"42P01", "42883", "3F000"}  # undefined table / function, no such schema


DDL_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {version} (
    version integer NOT NULL
)
"""

# Version 2 -> 3, run only on older tables (an ALTER, even one that changes nothing, makes
# connections re-plan their prepared statements): rows stored before list lengths were kept
# have none, and are never compacted into prefix rows.
# Migrations run their ALTERs inside ``DO``: psycopg, seeing an ``ALTER`` command tag in a
# pipeline, forgets the connection's prepared statements while later ones are being prepared,
# and the next load fails with 'prepared statement "_pg3_2" does not exist'.
DDL_ADD_ITEMS = "DO $m$ BEGIN ALTER TABLE {blobs} ADD COLUMN IF NOT EXISTS items bigint; END $m$"
# Version 3 -> 4: a blob whose bytes are inside a write of the same thread (the run's input, as
# the ``__start__`` task's result) keeps only their header in ``data`` and says where the rest
# is: bytes ``src_at`` (0-based) to ``src_at + src_len`` of the ``result`` write of task
# ``src_task`` at checkpoint ``src_id``. Loads append them (``BLOB_DATA``); a prune that drops
# that write copies them into the row first.
DDL_ADD_SOURCE = """
DO $m$ BEGIN
ALTER TABLE {blobs} ADD COLUMN IF NOT EXISTS src_id text COLLATE "C",
                    ADD COLUMN IF NOT EXISTS src_task text COLLATE "C",
                    ADD COLUMN IF NOT EXISTS src_at integer,
                    ADD COLUMN IF NOT EXISTS src_len integer;
END $m$
"""

DDL = (
    """
CREATE TABLE IF NOT EXISTS {heads} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    head          text COLLATE "C",
    next          text[]      NOT NULL DEFAULT '{{}}',
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns)
)
""",
    # ``list_threads`` pages through root-namespace rows by this index, most recent first. An
    # update that changes ``updated_at`` cannot be HOT (it is indexed, whatever the predicate
    # says), so a root row's every put adds index entries; other namespaces are never listed, and
    # keep the time they were created: their updates stay HOT.
    """
CREATE INDEX IF NOT EXISTS {heads_recent_name} ON {heads} (updated_at DESC, thread_id DESC)
    WHERE checkpoint_ns = ''
""",
    """
CREATE TABLE IF NOT EXISTS {cps} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    parent_id     text COLLATE "C",
    step          integer     NOT NULL,
    created_at    timestamptz,
    body          bytea       NOT NULL,
    metadata      bytea       NOT NULL,
    blob_keys     text[] COLLATE "C" NOT NULL,
    blob_versions text[] COLLATE "C" NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
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
    # ``p_shape`` holds everything but the bytes, as JSON: ``{"next": [name], "refs": [[key,
    # version]], "check": [[key, version]], "blobs": [[key, version, start, base, chain_bytes,
    # full_bytes, crc32, items, src_id, src_task, src_at, src_len]], "writes": [[task_id, kind,
    # task_name]], "prefixes": [[key,
    # version, target, full_bytes, items]]}``; ``p_data`` and ``p_write_data`` hold the bytes of
    # ``blobs`` and ``writes``, in the same order. (One JSON value costs the client far less to
    # send than a dozen typed arrays.) ``prefixes`` (compaction) turn stored versions into
    # prefix rows of a blob inserted above; they are tiny, so the rewrite leaves little behind.
    """
CREATE OR REPLACE FUNCTION {put}(
    p_thread text, p_ns text, p_cid text, p_parent text, p_fork boolean, p_step integer,
    p_created_at timestamptz, p_body bytea, p_metadata bytea, p_shape json,
    p_data bytea[], p_write_data bytea[]
) RETURNS void LANGUAGE plpgsql AS $threadline$
DECLARE
    v_shape jsonb := p_shape;  -- parsed once: each ``->`` on ``json`` parses the text again
BEGIN
    PERFORM {advance}(p_thread, p_ns, p_parent, p_cid, p_fork,
                      ARRAY(SELECT n FROM jsonb_array_elements_text(v_shape->'next')
                                WITH ORDINALITY AS x(n, i) ORDER BY i));
    -- Never an upsert: the head's compare-and-set guarantees the id is new.
    INSERT INTO {cps} (
        thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, body, metadata,
        blob_keys, blob_versions
    ) VALUES (
        p_thread, p_ns, p_cid, p_parent, p_step, p_created_at, p_body, p_metadata,
        ARRAY(SELECT r->>0 FROM jsonb_array_elements(v_shape->'refs')
                    WITH ORDINALITY AS x(r, i) ORDER BY i),
        ARRAY(SELECT r->>1 FROM jsonb_array_elements(v_shape->'refs')
                    WITH ORDINALITY AS x(r, i) ORDER BY i)
    );
    IF cardinality(p_data) > 0 THEN
        -- A (key, version) stored already holds the same value (perhaps as a prefix row).
        INSERT INTO {blobs} (
            thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes,
            crc32, data, items, src_id, src_task, src_at, src_len
        )
        SELECT p_thread, p_ns, b->>0, b->>1, b->>2, b->>3, (b->>4)::bigint, (b->>5)::bigint,
               (b->>6)::bigint, p_data[i], (b->>7)::bigint, b->>8, b->>9, (b->>10)::integer,
               (b->>11)::integer
          FROM jsonb_array_elements(v_shape->'blobs') WITH ORDINALITY AS x(b, i)
        ON CONFLICT (thread_id, checkpoint_ns, key, version) DO NOTHING;
    END IF;
    IF jsonb_array_length(COALESCE(v_shape->'prefixes', '[]'::jsonb)) > 0 THEN
        UPDATE {blobs} AS b
           SET start = r->>2, base = r->>2, chain_bytes = 0, full_bytes = (r->>3)::bigint,
               crc32 = 0, data = ''::bytea, items = (r->>4)::bigint
          FROM jsonb_array_elements(v_shape->'prefixes') AS x(r)
         WHERE b.thread_id = p_thread AND b.checkpoint_ns = p_ns
           AND b.key = r->>0 AND b.version = r->>1;
    END IF;
    IF jsonb_array_length(v_shape->'check') > 0 THEN
        PERFORM {check_refs}(
            p_thread, p_ns,
            ARRAY(SELECT r->>0 FROM jsonb_array_elements(v_shape->'check')
                    WITH ORDINALITY AS x(r, i) ORDER BY i),
            ARRAY(SELECT r->>1 FROM jsonb_array_elements(v_shape->'check')
                    WITH ORDINALITY AS x(r, i) ORDER BY i));
    END IF;
    IF cardinality(p_write_data) > 0 THEN
        INSERT INTO {writes} (
            thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data
        )
        SELECT p_thread, p_ns, p_cid, w->>0, w->>1, w->>2, p_write_data[i]
          FROM jsonb_array_elements(v_shape->'writes') WITH ORDINALITY AS x(w, i)
         ORDER BY i
        ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, kind) DO UPDATE SET
            task_name = excluded.task_name,
            data = excluded.data;
    END IF;
END
$threadline$
""",
    # Puts of many threads in one statement (``PostgresSaver.aput`` under concurrency): one round
    # trip and one commit for all. Each runs in its own subtransaction, so one that loses its
    # compare-and-set (``TL409``) or misses values (``TL410``) is undone alone and reported in
    # its row; any other error fails them all. ``p_data`` / ``p_write_data`` hold every put's
    # bytes in order, each put taking as many as its shape lists.
    """
CREATE OR REPLACE FUNCTION {put_many}(
    p_threads text[], p_nss text[], p_cids text[], p_parents text[], p_forks boolean[],
    p_steps integer[], p_created timestamptz[], p_bodies bytea[], p_metadata bytea[],
    p_shapes json[], p_data bytea[], p_write_data bytea[]
) RETURNS TABLE (state text, detail text) LANGUAGE plpgsql AS $threadline$
DECLARE
    v_shape jsonb;
    v_blobs integer;
    v_writes integer;
    v_b integer := 0;
    v_w integer := 0;
BEGIN
    FOR i IN 1 .. cardinality(p_threads) LOOP
        v_shape := p_shapes[i];
        v_blobs := jsonb_array_length(v_shape->'blobs');
        v_writes := jsonb_array_length(v_shape->'writes');
        state := NULL;
        detail := NULL;
        BEGIN
            PERFORM {put}(
                p_threads[i], p_nss[i], p_cids[i], p_parents[i], p_forks[i], p_steps[i],
                p_created[i], p_bodies[i], p_metadata[i], p_shapes[i],
                COALESCE(p_data[v_b + 1 : v_b + v_blobs], '{{}}'),
                COALESCE(p_write_data[v_w + 1 : v_w + v_writes], '{{}}'));
        EXCEPTION WHEN SQLSTATE 'TL409' OR SQLSTATE 'TL410' THEN
            GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
        END;
        v_b := v_b + v_blobs;
        v_w := v_w + v_writes;
        RETURN NEXT;
    END LOOP;
END
$threadline$
""",
)
