"""CLI pieces that need no server: argument values, UI links, progress, rendering."""

from __future__ import annotations

import argparse
import asyncio
import io
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata

from durable_agents.activities.contracts import PendingApproval, RunState
from durable_agents.checkpoint.format import Checkpoint, Message, ToolCall
from durable_agents.cli import main
from durable_agents.cli._common import command_prefix, duration, progress_wanted, ui_link
from durable_agents.cli._progress import Progress
from durable_agents.cli._render import approvals_table, pending_lines, render_checkpoint, render_transcript
from durable_agents.cli.fork import tool_results


def _args(**kw) -> argparse.Namespace:
    base = {
        "address": None,
        "namespace": None,
        "store": "sqlite:///.durable-agents/store.db",
        "task_queue": "durable-agents",
        "ui_url": None,
    }
    return argparse.Namespace(**{**base, **kw})


@pytest.fixture(autouse=True)
def _no_ambient_temporal_config(monkeypatch, tmp_path):
    for name in ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "DURABLE_AGENTS_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))


@pytest.mark.parametrize(
    "text, expected",
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("12h", timedelta(hours=12)),
        ("30d", timedelta(days=30)),
        ("1.5h", timedelta(minutes=90)),
        (" 2d ", timedelta(days=2)),
    ],
)
def test_durations(text, expected):
    assert duration(text) == expected


@pytest.mark.parametrize("text", ["3w", "", "d", "30", "-1d", "1 day"])
def test_bad_durations(text):
    with pytest.raises(argparse.ArgumentTypeError, match="write a number and a unit s, m, h or d"):
        duration(text)


def test_ui_link_default_local_flag_and_unknown():
    assert ui_link(_args(), "s-1") == "http://localhost:8233/namespaces/default/workflows/s-1"
    assert ui_link(_args(address="127.0.0.1:7233"), "s-1").startswith("http://localhost:8233/")
    assert ui_link(_args(address="temporal.internal:7233"), "s-1") is None  # UI address unknown
    link = ui_link(
        _args(address="temporal.internal:7233", namespace="prod team", ui_url="https://ui.example/"), "a/b c"
    )
    assert link == "https://ui.example/namespaces/prod%20team/workflows/a%2Fb%20c"


def test_command_prefix_repeats_only_the_flags_given():
    assert command_prefix(_args()) == "durable-agents"
    assert command_prefix(_args(address="h:1", store="sqlite:////tmp/my store.db", task_queue="tq")) == (
        "durable-agents --address h:1 --store 'sqlite:////tmp/my store.db' --task-queue tq"
    )


def test_progress_is_wanted_on_a_terminal_or_when_asked(monkeypatch):
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert progress_wanted(_args(progress=None)) is False
    assert progress_wanted(_args(progress=True)) is True
    assert progress_wanted(_args(progress=False)) is False


def test_tool_results_parse():
    [one] = tool_results(['call_1={"ok": true, "n": [1, 2]}'])
    assert one.tool_call_id == "call_1" and one.result == {"ok": True, "n": [1, 2]}
    assert tool_results(['c="a=b"'])[0].result == "a=b"  # only the first '=' separates


class _Handle:
    def __init__(self, details: list[object]) -> None:
        self.details = details

    async def query(self, name, result_type=None, rpc_timeout=None):
        if name == "__temporal_workflow_metadata":
            value = self.details.pop(0) if len(self.details) > 1 else self.details[0]
            if isinstance(value, Exception):
                raise value
            return WorkflowMetadata(current_details=value)
        return RunState(message_count=3, step_index=2, pending_tool_calls=[ToolCall(id="c", name="nap", arguments={})])


class _Client:
    def __init__(self, handle: _Handle) -> None:
        self.handle = handle

    def get_workflow_handle(self, workflow_id):
        return self.handle


async def test_progress_prints_only_changes():
    details = [
        "",
        "step 0 · model turn 1",
        "step 0 · model turn 1",
        "step 1 · tool nap",
        "step 1 · tool nap",
        RuntimeError("no worker"),
        "step 2 · stop",
    ]
    stream = io.StringIO()
    async with Progress(_Client(_Handle(details)), "s-1", stream=stream, interval=0.01) as progress:
        await asyncio.sleep(0.3)
    assert progress.shown == [
        "step 2 · tools nap",
        "step 0 · model turn 1",
        "step 1 · tool nap",
        "step 2 · tools nap",
        "step 2 · stop",
    ]
    lines = stream.getvalue().splitlines()
    assert len(lines) == 5 and all(line.startswith("  [") and "s] s-1: " in line for line in lines)


async def test_progress_disabled_prints_nothing():
    stream = io.StringIO()
    async with Progress(_Client(_Handle(["step 1 · tool nap"])), "s-1", enabled=False, stream=stream):
        await asyncio.sleep(0.05)
    assert stream.getvalue() == ""


def test_rendering_transcripts_and_approvals():
    call = ToolCall(id="c1", name="charge_card", arguments={"amount": 10})
    later = ToolCall(id="c2", name="charge_card", arguments={"amount": 20})
    messages = [Message.user("hi"), Message(role="assistant", content="Charging.", tool_calls=[call, later])]
    pending = PendingApproval(
        approval_id="ap-1",
        session_id="s-1",
        agent="payments",
        tool_name="charge_card",
        tool_call_id="c1",
        arguments={"amount": 10},
        requested_at=datetime.now(UTC) - timedelta(minutes=3),
        remaining_tool_calls=[later],
    )
    text = render_transcript(messages, steps=True, marks={"c1": "⏸ awaiting approval ap-1"})
    assert text.splitlines() == [
        "  user       hi",
        "── step 1",
        "  assistant  Charging.",
        '  ⚙ tool     charge_card({"amount":10}) [c1]  ⏸ awaiting approval ap-1',
        '  ⚙ tool     charge_card({"amount":20}) [c2]',
    ]
    assert render_transcript(messages, start=1, steps=True).splitlines()[0] == "── step 1"
    shown = render_checkpoint(Checkpoint(session_id="s-1", agent="payments", messages=messages), pending)
    assert "[c1]  ⏸ awaiting approval ap-1" in shown and "[c2]  … waits for the approval" in shown
    assert "[c2]  … no result yet" in render_checkpoint(Checkpoint(session_id="s-1", messages=messages))
    lines = pending_lines(pending, decide="durable-agents")
    assert lines[0].startswith("awaiting approval ap-1 since ") and lines[0].endswith("(3m ago):")
    assert lines[-2:] == [
        "approve: durable-agents approve s-1 --approval-id ap-1",
        "reject:  durable-agents reject s-1 --approval-id ap-1 --note 'why'",
    ]
    table = approvals_table([pending]).splitlines()
    assert table[0].split() == ["SESSION", "AGENT", "TOOL", "ARGUMENTS", "APPROVAL", "ID", "SINCE"]
    assert table[1].split()[:5] == ["s-1", "payments", "charge_card", '{"amount":10}', "ap-1"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["approve"], "the following arguments are required: session"),
        (["prune", "--older-than", "soon"], "invalid duration 'soon'"),
        (["fork", "s", "--from-step", "-1"], "steps count from 0"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(argv, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and needle in err and err.endswith("--help`)")


def test_json_lists_print_what_the_documented_dicts_say(capsys):
    """``approvals --json`` and ``sessions --json`` print their models through pydantic's
    encoder (fast over ten thousand entries): the same text ``json.dumps`` gives of
    ``to_dict()``: camelCase, no nulls, non-ASCII kept, times as ISO strings."""
    from durable_agents.checkpoint.format import CheckpointStatus, SessionSummary
    from durable_agents.cli._common import print_json, print_models
    from durable_agents.cli.approvals import ApprovalView

    at = datetime(2026, 12, 2, 9, 30, 1, 250000, tzinfo=UTC)
    views = [
        ApprovalView.of(
            PendingApproval(
                approval_id="a1",
                session_id="s-ü",
                agent="payments",
                tool_name="charge",
                tool_call_id="call_1",
                arguments={"amount": 12.5, "note": "für Café ☕", "tags": ["x", {"deep": None}]},
                requested_at=at,
                remaining_tool_calls=[ToolCall(id="call_2", name="email", arguments={})],
                timeout_at=at + timedelta(hours=1),
            )
        ),
        ApprovalView.of(
            PendingApproval(
                approval_id="a2",
                session_id="s2",
                agent="a",
                tool_name="t",
                tool_call_id="c",
                arguments={},
                requested_at=at,
            )
        ),
    ]
    sessions = [
        SessionSummary(session_id="s", agent="a", status=CheckpointStatus.FINISHED, step_index=3, message_count=7)
    ]
    for models in (views, sessions, []):
        print_json([m.to_dict() for m in models])
        expected = capsys.readouterr().out
        print_models(models)
        assert capsys.readouterr().out == expected
