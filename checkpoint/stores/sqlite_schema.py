"""The SQLite store's schema. Migrations are append-only: older files gain new tables and indexes."""

MIGRATIONS: list[str] = [
    """
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        transcript_id INTEGER NOT NULL,
        header TEXT NOT NULL,
        agent TEXT,
        status TEXT NOT NULL,
        step_index INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        approval_id TEXT,
        updated_at REAL NOT NULL
    );
    CREATE TABLE messages (
        session_id TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        UNIQUE (session_id, transcript_id, position)
    );
    CREATE TABLE tool_calls (
        session_id TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at REAL NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, tool_call_id)
    ) WITHOUT ROWID;
    """,
    """
    CREATE TABLE checkpoint_history (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        step INTEGER NOT NULL,
        saved_at REAL NOT NULL,
        status TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        header TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    """,
    # list_sessions orders by updated_at and prune deletes by it (and history
    # entries by saved_at): PostgreSQL's schema had both indexes from the start.
    """
    CREATE INDEX sessions_updated_at ON sessions (updated_at);
    CREATE INDEX checkpoint_history_saved_at ON checkpoint_history (saved_at);
    """,
    # Tool markers keyed by the result's transcript position, not by the model's
    # call id (models reuse ids: call_0 in every turn, twice in one turn). The
    # id-keyed markers of runs in flight across this upgrade are not carried over.
    """
    DROP TABLE tool_calls;
    CREATE TABLE tool_markers (
        session_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at REAL NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, position)
    ) WITHOUT ROWID;
    """,
    # The store's identity: a random store_id made with the store (SqlStore._migrate).
    """
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
    # Run input, written by the client before it starts a run (never in Temporal payloads).
    """
    CREATE TABLE run_inputs (
        session_id TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, token)
    );
    """,
    # Why the last run failed (lastError), for `sessions` without parsing every header.
    """
    ALTER TABLE sessions ADD COLUMN last_error TEXT;
    """,
    # Each session's event log (what streamed runs write; AgentClient.stream/watch read it):
    # seq is the event's offset in its session, from 1; a key makes a retried write a no-op.
    """
    CREATE TABLE events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        event_key TEXT,
        created_at REAL NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    ) WITHOUT ROWID;
    CREATE UNIQUE INDEX events_key ON events (session_id, event_key);
    """,
    # Tool markers as a rowid table: WITHOUT ROWID keeps each ~1 KB result in the B-tree's own
    # pages (overflowing at a few rows a page), which made them 4x their bytes on disk and the
    # store 3.4x its transcript; as rowid rows they pack like the messages (issue 13).
    """
    CREATE TABLE tool_markers_packed (
        session_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at REAL NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, position)
    );
    INSERT INTO tool_markers_packed SELECT session_id, position, starts, first_started_at, result FROM tool_markers;
    DROP TABLE tool_markers;
    ALTER TABLE tool_markers_packed RENAME TO tool_markers;
    """,
    # A history entry's decisions as rows (issue 42: a header carries every decision of its
    # session, and each save added all of them to the ring again): an entry names its list
    # and how many of its rows it has; a list grows by the decisions added since, and a save
    # whose decisions are not the newest entry's plus more starts another. Entries written
    # before (no list) hold their decisions in their header, as the session's row still does.
    """
    ALTER TABLE checkpoint_history ADD COLUMN decision_list INTEGER;
    ALTER TABLE checkpoint_history ADD COLUMN decision_count INTEGER;
    CREATE TABLE history_decisions (
        session_id TEXT NOT NULL,
        list_id INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, list_id, idx)
    );
    """,
]
