"""`run --stream` prints the model's text as it streams, `--events` every event as a JSON
line, and `watch SESSION` follows a run from another terminal (real CLI processes)."""

from __future__ import annotations

import json
import time

from durable_agents.checkpoint import Role, SqliteStore
from durable_agents.events import parse_event, step_text
from tests.cli.conftest import session_id


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_run_stream_prints_the_text_as_it_streams_then_the_summary(cli):
    sid = session_id("stream")
    out = cli.ok("run", "booker", "Book a table where it is sunny", "--session", sid, "--stream")
    lines = out.splitlines()
    assert lines[0] == "  assistant  Checking the weather."
    assert lines[1].startswith("  ⚙ tool     get_weather(") and lines[3].startswith("  → result   get_weather [")
    assert "  assistant  Booked a table for 2 at Roscioli in Rome." in lines
    assert any(line.startswith(f"session {sid}: stop, 3 steps, 3 tool calls") for line in lines)
    assert "user       Book a table" not in out  # the transcript is not printed a second time


def test_run_events_prints_one_json_line_per_event_and_watch_replays_them(cli):
    sid = session_id("events")
    lines = _events(cli.ok("run", "booker", "Book a table", "--session", sid, "--events"))
    assert [e["offset"] for e in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["type"] == "run-started" and lines[-1]["type"] == "run-finished"
    result = lines[-1]["result"]
    assert result["finishReason"] == "stop" and result["sessionId"] == sid
    events = [parse_event(e, e["offset"]) for e in lines]
    stored = [m.content for m in _messages(cli, sid) if m.role == Role.ASSISTANT]
    assert [step_text(events, step) for step in (1, 2, 3)] == stored

    replayed = _events(cli.ok("watch", sid, "--events", "--after", "0"))
    assert replayed == lines
    tail = _events(cli.ok("watch", sid, "--events", "--after", str(lines[-3]["offset"])))
    assert tail == lines[-2:]


def test_watch_follows_a_run_from_another_terminal(cli):
    sid = session_id("follow")
    started = cli.ok("run", "dozer", "nap", "--session", sid, "--no-wait")
    assert f"started session {sid}" in started
    began = time.monotonic()
    watched = cli("watch", sid, "--events", timeout=120)
    assert watched.returncode == 0, watched.stderr
    lines = _events(watched.stdout)
    kinds = [e["type"] for e in lines]
    assert kinds[0] == "run-started" and kinds[-1] == "run-finished", kinds
    assert "tool-call-started" in kinds and lines[-1]["result"]["finishReason"] == "stop"
    assert time.monotonic() - began < 60
    # and as text: the same run again, at once (it ended)
    text = cli.ok("watch", sid, "--stream")
    assert "  assistant  A long nap first." in text and "  assistant  Rested at last." in text
    assert f"session {sid}: stop, 2 steps" in text


def test_run_stream_of_a_paused_run_shows_the_approval_and_how_to_decide(cli):
    sid = session_id("streampause")
    out = cli.ok("run", "payments", "Charge the customer", "--session", sid, "--stream")
    assert "  ⏸ approval  charge_card(" in out and f"session {sid}: awaiting-approval" in out
    assert "approve: durable-agents" in out
    decided = cli("approve", sid, "--by", "ann")
    assert decided.returncode == 0, decided.stderr
    after = _events(cli.ok("watch", sid, "--events"))
    assert any(e["type"] == "approval-decided" and e.get("decidedBy") == "ann" for e in after)


def test_stream_flags_are_off_when_piped_and_json_keeps_the_result_object(cli):
    sid = session_id("piped")
    out = cli.ok("run", "booker", "Book a table", "--session", sid)
    assert "  user       Book a table" in out  # piped: the transcript at the end, as before
    assert json.loads(cli.ok("watch", sid, "--json"))["finishReason"] == "stop"


def _messages(cli, sid: str):
    store = SqliteStore(cli.store_path)
    try:
        return store.load(sid).messages
    finally:
        store.close()
