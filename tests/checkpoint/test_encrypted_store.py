"""Message content encrypted at rest (``EncryptedStore``, ``--store-encryption``).

The whole store conformance suite runs on the wrapper (over SQLite and files:
identity, location, history, tool markers, concurrency), and the bytes a store
keeps on disk are checked to hold none of a session's text.
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from durable_agents.checkpoint import Checkpoint, CheckpointStore, FileStore, Message, SqliteStore, ToolCall
from durable_agents.checkpoint.conformance import StoreConformance
from durable_agents.checkpoint.conformance._base import grow
from durable_agents.checkpoint.encryption import EncryptionKeyError, EncryptionKeys, new_key
from durable_agents.checkpoint.format import CheckpointStatus, Decision, RunError, SubagentApproval
from durable_agents.checkpoint.stores.encrypted import SEALED_PREFIX, EncryptedStore
from tests.checkpoint.conftest import storage_bytes

K1, K2 = new_key("k1"), new_key("k2")
KEYS = EncryptionKeys.parse(f"{K1},{K2}")
SECRETS = [
    "Zanzibar-4471",
    "Marguerite-Okafor",
    "note-Quokka-19",
    "result-Vermilion-88",
    "args-Tamarind-5",
    "child-args-Ocelot-3",
]


class TestEncryptedSqliteStore(StoreConformance):
    @pytest.fixture
    def make_store(self, tmp_path):
        return lambda history_limit: EncryptedStore(SqliteStore(tmp_path / "s.db", history_limit=history_limit), KEYS)

    @pytest.fixture
    def make_other_store(self, tmp_path):
        return lambda history_limit: EncryptedStore(
            SqliteStore(tmp_path / "other" / "s.db", history_limit=history_limit), KEYS
        )


class TestEncryptedFileStore(StoreConformance):
    @pytest.fixture
    def make_store(self, tmp_path):
        return lambda history_limit: EncryptedStore(FileStore(tmp_path / "fs", history_limit=history_limit), KEYS)

    @pytest.fixture
    def make_other_store(self, tmp_path):
        return lambda history_limit: EncryptedStore(FileStore(tmp_path / "other", history_limit=history_limit), KEYS)


def test_sealing_costs_a_constant_factor_of_storage(tmp_path):
    """The suite's storage-growth checks compare with the plain transcript's size, so they
    skip above; here: the same sessions take at most 1.6x the bytes sealed."""
    plain, sealed = SqliteStore(tmp_path / "plain.db"), EncryptedStore(SqliteStore(tmp_path / "sealed.db"), KEYS)
    for store in (plain, sealed):
        grow(store, "a", 60, size=1024)
    ratio = storage_bytes(sealed.inner) / storage_bytes(plain)
    print(f"sealed/plain storage: {ratio:.2f}")
    assert 1.0 < ratio < 1.6
    plain.close()
    sealed.close()


def _session(session_id: str = "s-1") -> Checkpoint:
    """A checkpoint with a secret in every field that holds user content."""
    call = ToolCall(id="call_1", name="book_table", arguments={"restaurant": SECRETS[4]})
    return Checkpoint(
        session_id=session_id,
        agent="booker",
        step_index=2,
        status=CheckpointStatus.AWAITING_APPROVAL,
        approval_id="ap-1",
        messages=[
            Message.system("You book tables."),
            Message.user(f"Book for {SECRETS[1]} in {SECRETS[0]}"),
            Message(role="assistant", content="Booking.", tool_calls=[call]),
            Message.tool_result(call, f'{{"ok": "{SECRETS[3]}"}}'),
        ],
        remaining_tool_calls=[call],
        subagent_approval=SubagentApproval(  # the run waits on a grandchild's call
            session_id=f"{session_id}/2",
            approval_id="ap-1",
            remaining_tool_calls=[ToolCall(id="c2", name="ask", arguments={"q": SECRETS[5]})],
            subagent_approval=SubagentApproval(
                session_id=f"{session_id}/2/1",
                approval_id="ap-1",
                tool_call=ToolCall(id="c1", name="charge", arguments={"to": SECRETS[5]}),
                remaining_tool_calls=[],
            ),
        ),
        pending_input=[Message.user(f"also {SECRETS[0]}")],
        output={"answer": SECRETS[3]},
        business_state={"customer": SECRETS[1]},
        last_error=RunError(message=f"provider said {SECRETS[0]}", type="X", step=1),
        decisions=[
            Decision(
                approval_id="ap-0",
                tool_call_id="call_0",
                tool_name="book_table",
                approved=True,
                decided_at=datetime.now(UTC),
                note=SECRETS[2],
                arguments={"restaurant": SECRETS[4]},
            )
        ],
    )


def _bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.mark.parametrize("backend", ["sqlite", "file"])
def test_no_session_text_is_readable_in_the_store_files(tmp_path, backend):
    inner = SqliteStore(tmp_path / "db" / "s.db") if backend == "sqlite" else FileStore(tmp_path / "db")
    store = EncryptedStore(inner, KEYS)
    saved = _session()
    store.save(saved)
    store.put_run_input("s-1", "tok", [Message.user(f"input {SECRETS[1]}")])
    store.record_tool_result("s-1", 4, Message.tool_result(saved.messages[2].tool_calls[0], SECRETS[3]), 4, 1)
    assert store.load("s-1").messages[1].content == f"Book for {SECRETS[1]} in {SECRETS[0]}"
    store.close()

    raw = _bytes_under(tmp_path / "db")
    assert b"booker" in raw and b"book_table" in raw  # what indexes sessions stays readable…
    assert SEALED_PREFIX.encode() in raw
    for secret in SECRETS:
        assert secret.encode() not in raw, secret  # …no text of the session does

    reopened = EncryptedStore(
        SqliteStore(tmp_path / "db" / "s.db") if backend == "sqlite" else FileStore(tmp_path / "db"), KEYS
    )
    loaded = reopened.load("s-1")
    assert loaded.model_dump(exclude={"updated_at", "messages"}) == saved.model_dump(exclude={"updated_at", "messages"})
    assert loaded.messages[:4] == saved.messages
    assert loaded.messages[4].content == SECRETS[3]
    assert reopened.run_input("s-1", "tok") == [Message.user(f"input {SECRETS[1]}")]
    assert reopened.list_sessions()[0].last_error.message == f"provider said {SECRETS[0]}"
    assert reopened.history("s-1")[0].checkpoint.decisions[0].note == SECRETS[2]
    reopened.close()


def test_store_files_stay_owner_only(tmp_path):
    store = EncryptedStore(SqliteStore(tmp_path / "private" / "s.db"), KEYS)
    store.save(_session())
    store.close()
    for path in (tmp_path / "private").iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, (path, oct(path.stat().st_mode))
    assert stat.S_IMODE(os.stat(tmp_path / "private").st_mode) & 0o077 == 0


def _key_ids(inner: CheckpointStore, session_id: str) -> set[str]:
    """The key ids the stored messages of a session are sealed with."""
    return {m.content[len(SEALED_PREFIX) :].split(":")[0] for m in inner.load_messages(session_id)}


def _transcript_id(inner: CheckpointStore, session_id: str) -> int:
    assert isinstance(inner, SqliteStore)
    return inner._db.execute("SELECT transcript_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()[0]


def test_rotation_reads_old_and_new_and_writes_with_the_newest(tmp_path):
    path = tmp_path / "s.db"
    old = EncryptedStore(SqliteStore(path), EncryptionKeys.parse(K1))
    old.save(_session("written-with-k1"))
    old.close()

    rotated = EncryptedStore(SqliteStore(path), EncryptionKeys.parse(f"{K1},{K2}"))  # k2 newest
    rotated.save(_session("written-with-k2"))
    assert rotated.load("written-with-k1").messages[1].content.startswith(f"Book for {SECRETS[1]}")
    assert rotated.load("written-with-k2").messages[1].content.startswith(f"Book for {SECRETS[1]}")
    assert _key_ids(rotated.inner, "written-with-k1") == {"k1"}
    assert _key_ids(rotated.inner, "written-with-k2") == {"k2"}

    # appending to the k1 session seals the new message with k2; saving the session again
    # unchanged keeps the k1 bytes: no new transcript, and no tool marker dropped (a
    # changed message would drop the markers after it: an at-most-once tool could rerun)
    header = rotated.load_header("written-with-k1")
    rotated.append(header.model_copy(update={"message_count": 5}), 4, [Message.user("more")])
    assert _key_ids(rotated.inner, "written-with-k1") == {"k1", "k2"}
    assert rotated.tool_started("written-with-k1", 5) == 0
    transcript = _transcript_id(rotated.inner, "written-with-k1")
    rotated.save(rotated.load("written-with-k1").model_copy(update={"updated_at": None}))
    assert _key_ids(rotated.inner, "written-with-k1") == {"k1", "k2"}
    assert _transcript_id(rotated.inner, "written-with-k1") == transcript
    assert rotated.tool_started("written-with-k1", 5) == 1  # the marker survived the save
    rotated.close()

    retired_too_soon = EncryptedStore(SqliteStore(path), EncryptionKeys.parse(K2))
    with pytest.raises(EncryptionKeyError, match="key id 'k1', which is not among the keys") as lost:
        retired_too_soon.load("written-with-k1")
    assert lost.value.key_id == "k1"
    retired_too_soon.close()


def test_other_key_material_under_the_same_id_names_the_key(tmp_path):
    store = EncryptedStore(SqliteStore(tmp_path / "s.db"), EncryptionKeys.parse(K1))
    store.save(_session())
    store.close()
    impostor = EncryptedStore(SqliteStore(tmp_path / "s.db"), EncryptionKeys.parse(new_key("k1")))
    with pytest.raises(EncryptionKeyError, match="encrypted with key id 'k1' does not decrypt with the key of that id"):
        impostor.load_messages("s-1")
    impostor.close()


def test_a_store_written_before_encryption_still_reads(tmp_path):
    plain = SqliteStore(tmp_path / "s.db")
    plain.save(_session())
    plain.close()
    store = EncryptedStore(SqliteStore(tmp_path / "s.db"), KEYS)
    assert store.load("s-1").messages[1].content == f"Book for {SECRETS[1]} in {SECRETS[0]}"
    assert store.load_header("s-1").decisions[0].note == SECRETS[2]
    store.close()
