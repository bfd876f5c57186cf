"""The event log beyond the conformance suite: sealed at rest by ``EncryptedStore``, and
``FileStore``'s log read by several handles, after a crash tore its last line, and
after the file was replaced."""

from __future__ import annotations

import json
import os
from pathlib import Path

from durable_agents.checkpoint import FileStore, SqliteStore
from durable_agents.checkpoint.encryption import EncryptionKeys, new_key
from durable_agents.checkpoint.stores.encrypted import EncryptedStore
from durable_agents.events import TextDelta, parse_event

SECRET = "Zanzibar-4471 is the code"


def _delta(n: int, text: str = "t") -> str:
    return TextDelta(session_id="a", step=1, text=f"{text}{n}").to_json()


def test_encrypted_store_seals_event_bodies_at_rest(tmp_path: Path):
    keys = EncryptionKeys.parse(new_key("k1"))
    for inner in (SqliteStore(tmp_path / "s.db"), FileStore(tmp_path / "fs")):
        store = EncryptedStore(inner, keys)
        store.append_events("a", [("turn:1", _delta(1, SECRET))])
        [event] = store.read_events("a")
        assert parse_event(event.body).text == f"{SECRET}1" and event.key == "turn:1"
        [raw] = inner.read_events("a")
        assert SECRET not in raw.body and raw.key == "turn:1"  # keys name positions, never content
        store.close()
    on_disk = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET.encode() not in on_disk


def test_file_store_handles_tail_one_log(tmp_path: Path):
    writer, reader = FileStore(tmp_path), FileStore(tmp_path)
    writer.append_events("a", [(None, _delta(1))])
    assert [e.offset for e in reader.read_events("a")] == [1]
    reader.append_events("a", [("k", _delta(2))])  # the other handle appends: offsets go on
    assert writer.append_events("a", [("k", _delta(9)), (None, _delta(3))]) == [2, 3]
    assert [e.offset for e in reader.read_events("a", 1)] == [2, 3]
    assert reader.last_event_offset("a") == 3


def test_file_store_skips_a_line_a_crash_tore(tmp_path: Path):
    store = FileStore(tmp_path)
    store.append_events("a", [(None, _delta(1))])
    path = tmp_path / "events" / "a.jsonl"
    with open(path, "ab") as f:
        f.write(b'2\tnull\t61\t{"type":"text-del')  # a write cut short by a crash
    assert [e.offset for e in FileStore(tmp_path).read_events("a")] == [1]  # the torn line is not an event
    again = FileStore(tmp_path)
    assert again.append_events("a", [(None, _delta(2))]) == [2]
    events = again.read_events("a")
    assert [e.offset for e in events] == [1, 2] and json.loads(events[1].body)["text"] == "t2"


def test_file_store_reads_a_replaced_log_from_its_start(tmp_path: Path):
    store = FileStore(tmp_path)
    store.append_events("a", [(None, _delta(n)) for n in range(1, 4)])
    assert len(store.read_events("a")) == 3
    path = tmp_path / "events" / "a.jsonl"
    replacement = path.with_name("new.jsonl")
    replacement.write_text(f"1\tnull\t{len(_delta(7))}\t{_delta(7)}\n")
    os.replace(replacement, path)  # e.g. restored from a backup: another file
    assert [json.loads(e.body)["text"] for e in store.read_events("a")] == ["t7"]
    assert store.append_events("a", [(None, _delta(8))]) == [2]
