"""The PostgreSQL store's schema. Migrations are append-only: older databases gain new tables and indexes."""

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
        updated_at TIMESTAMPTZ NOT NULL
    );
    CREATE INDEX sessions_updated_at ON sessions (updated_at);
    CREATE TABLE messages (
        session_id TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        position INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, transcript_id, position)
    );
    CREATE TABLE tool_calls (
        session_id TEXT NOT NULL,
        tool_call_id TEXT NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at TIMESTAMPTZ NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, tool_call_id)
    );
    CREATE TABLE checkpoint_history (
        session_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        step INTEGER NOT NULL,
        saved_at TIMESTAMPTZ NOT NULL,
        status TEXT NOT NULL,
        transcript_id INTEGER NOT NULL,
        header TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE INDEX checkpoint_history_saved_at ON checkpoint_history (saved_at);
    """,
    # Tool markers keyed by the result's transcript position (see sqlite_schema.py).
    """
    DROP TABLE tool_calls;
    CREATE TABLE tool_markers (
        session_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        starts INTEGER NOT NULL,
        first_started_at TIMESTAMPTZ NOT NULL,
        result TEXT,
        PRIMARY KEY (session_id, position)
    );
    """,
    # The store's identity: a random store_id made with the store (SqlStore._migrate).
    """
    CREATE TABLE store_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    """,
    # Run input, written by the client before it starts a run (never in Temporal payloads).
    """
    CREATE TABLE run_inputs (
        session_id TEXT NOT NULL,
        token TEXT NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
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
        seq BIGINT NOT NULL,
        event_key TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
    CREATE UNIQUE INDEX events_key ON events (session_id, event_key);
    """,
    # A history entry's decisions as rows (see sqlite_schema.py).
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
