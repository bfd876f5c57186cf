"""Small CLI fixes: --version, singular counts, `dev --agent` help, aborted sessions in `sessions`."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from importlib.metadata import version

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.checkpoint.format import Checkpoint, Message, Usage
from durable_agents.cli._render import render_checkpoint
from tests.cli.conftest import Cli, session_id


def test_version_prints_the_installed_version(tmp_path):
    cli = Cli(address="127.0.0.1:1", task_queue="unused", store_path=tmp_path / "s.db")
    out = cli.inproc("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"durable-agents {version('durable-agents')}"


@pytest.mark.parametrize(
    "count, noun, text",
    [(0, "step", "0 steps"), (1, "step", "1 step"), (2, "step", "2 steps"), (1, "tool call", "1 tool call")],
)
def test_plural_counts_agree_with_their_number(count, noun, text):
    from durable_agents.cli._render import plural

    assert plural(count, noun) == text


def test_one_step_and_one_tool_call_print_singular(cli):
    sid = session_id("one")
    out = cli("run", "greeter", "hi", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert f"session {sid}: stop, 1 step, 0 tool calls," in out.stdout
    sid = session_id("one")
    out = cli("run", "napper", "nap", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert f"session {sid}: stop, 2 steps, 1 tool call," in out.stdout
    assert not re.search(r"\b1 (steps|tool calls|messages|requests|sessions)\b", out.stdout), out.stdout


def test_show_says_1_request_and_1_message():
    checkpoint = Checkpoint(session_id="s", messages=[Message.user("hi")], usage=Usage(requests=1))
    head = render_checkpoint(checkpoint)
    assert "messages 1 " in head or "1 message " in head
    assert "in 1 request" in head and "1 requests" not in head


def test_prune_and_fork_counts_are_singular_for_one(tmp_path):
    store = SqliteStore(tmp_path / "old.db")
    now = datetime.now(UTC)
    store.save(
        Checkpoint(
            session_id="old", messages=[Message.user("hi")], status="finished", updated_at=now - timedelta(days=40)
        )
    )
    store.close()
    cli = Cli(address="127.0.0.1:1", task_queue="unused", store_path=tmp_path / "old.db")
    assert cli.read("prune", "--older-than", "30d").splitlines()[0] == (
        "pruned 1 session, and history entries, last saved more than 30d ago"
    )


def test_dev_agent_help_says_what_it_does(tmp_path):
    cli = Cli(address="127.0.0.1:1", task_queue="unused", store_path=tmp_path / "s.db")
    out = cli.inproc("dev", "--help")
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert re.search(r"--agent MODULE:ATTR \w+", text), text  # a help text follows the flag
    assert "the worker" in text and "serve" in text, text


def test_sessions_shows_an_aborted_run_as_aborted(cli):
    sid = session_id("aborted")
    running = cli.popen("run", "slow", "Work on it", "--session", sid)
    store = SqliteStore(cli.store_path)
    try:
        deadline = time.monotonic() + 30
        while (header := store.load_header(sid)) is None or header.message_count < 3:
            assert time.monotonic() < deadline and running.poll() is None, running.communicate()
            time.sleep(0.1)
    finally:
        store.close()
    assert cli("cancel", sid).returncode == 0
    running.communicate(timeout=60)
    row = next(line for line in cli.read("sessions").splitlines() if line.startswith(sid))
    assert row.split()[2] == "aborted", row
    assert cli.read("sessions", "--status", "in-progress").count(sid) == 1  # still resumable: in-progress
