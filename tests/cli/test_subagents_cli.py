"""A parent with two sub-agents, one gated, through a real worker process and the CLI:
the writer's pause reaches the lead, ``approvals`` lists it once with both sessions,
``approve LEAD`` continues both, ``show LEAD`` renders the sub-agents' turns nested."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.conftest import Cli, session_id, stop

AGENTS = ["tests.subagent_agents:ALL"]


@pytest.fixture(scope="module")
def team_cli(env, tmp_path_factory):
    folder = tmp_path_factory.mktemp("team")
    runner = Cli(
        address=env.client.service_client.config.target_host,
        task_queue=f"team-{uuid.uuid4().hex[:8]}",
        store_path=folder / "store.db",
    )
    worker = runner.start_worker(AGENTS, folder / "worker.log")
    yield runner
    stop(worker)


def test_approve_the_parent_continues_the_gated_subagent_and_show_nests_their_turns(team_cli: Cli):
    cli, sid = team_cli, session_id("team")
    research, write = f"{sid}/3", f"{sid}/4"
    out = cli("run", "lead", "Rome", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert "awaiting-approval" in out.stdout
    assert f"in sub-agent writer (session {write})" in out.stdout
    assert f"approve {sid} --approval-id" in out.stdout  # the command to paste names the parent

    listed = cli.json("approvals")
    mine = [a for a in listed if sid in (a["sessionId"], a.get("subagentSessionId", "").split("/")[0])]
    assert len(mine) == 1, listed  # once, not again under the writer's own session
    (waiting,) = mine
    assert (waiting["sessionId"], waiting["agent"]) == (sid, "lead")
    assert (waiting["subagentSessionId"], waiting["subagentAgent"], waiting["toolName"]) == (write, "writer", "publish")
    table = cli.ok("approvals")
    row = next(line for line in table.splitlines() if line.startswith(sid))
    assert "IN SUB-AGENT" in table.splitlines()[0] and f"writer {write}" in row and "publish" in row

    shown = cli.read("show", sid)
    assert "status    awaiting-approval" in shown
    assert f"↳ sub-agent researcher · session {research} · finished (stop)" in shown
    assert f"↳ sub-agent writer · session {write} · awaiting-approval" in shown
    assert f"⏸ awaiting approval {waiting['approvalId']}" in shown  # marked in the writer's nested turns
    assert "in sub-agent writer" in shown

    decided = cli("approve", sid, "--by", "alice", "--note", "fine")
    assert decided.returncode == 0, decided.stderr
    assert f"approved publish [{waiting['toolCallId']}] in sub-agent writer ({write})" in decided.stdout
    assert "Team done:" in decided.stdout and f"session {sid}: stop" in decided.stdout

    shown = cli.read("show", sid)
    lines = shown.splitlines()
    assert "status    finished (stop)" in shown
    write_at = next(i for i, line in enumerate(lines) if f"session {write} · finished (stop)" in line)
    nested = [line for line in lines[write_at:] if line.startswith("      │ ")]
    nested = nested[: next((i for i, line in enumerate(nested[1:], 1) if "↳" in line), len(nested))]
    assert nested[0].endswith(f"session {write} · finished (stop)")
    assert any("⚙ tool     publish(" in line for line in nested), nested  # the writer's turns, indented
    assert any("✓ approved by alice" in line and "note 'fine'" in line for line in nested), nested
    assert nested[-1].endswith("assistant  Published."), nested
    assert lines[write_at + len(nested) : write_at + len(nested) + 2][-1].startswith("  assistant  Team done:")
    child = cli.read("show", write)
    assert f"parent    {sid} (its call call_2_1 runs this sub-agent)" in child
    checkpoint = json.loads(cli.read("show", write, "--json"))
    assert (checkpoint["parentSessionId"], checkpoint["parentToolCallId"]) == (sid, "call_2_1")
    assert not [a for a in cli.json("approvals") if a["sessionId"] in (sid, write)]


def test_a_subagent_session_is_refused_as_a_run_of_its_own(team_cli: Cli):
    cli, sid = team_cli, session_id("team")
    assert cli("run", "solo-lead", "Oslo", "--session", sid).returncode == 0
    out = cli("resume", f"{sid}/3")
    assert (
        out.returncode != 0 and "sub-agent session" in out.stderr and f"resume, approve or cancel {sid!r}" in out.stderr
    )
    assert "Traceback" not in out.stderr
