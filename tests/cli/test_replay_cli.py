"""`durable-agents replay`, `export` and `fork --batch`: the report as a table, JSON and JUnit
XML, the exit code a CI job is gated by, and bad input refused in one line (exit 2)."""

from __future__ import annotations

import asyncio
import json
import uuid
import xml.etree.ElementTree as ET

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.client import AgentClient
from durable_agents.worker import build_worker
from tests.cli.conftest import Cli, one_line_error
from tests.replay_agents import EFFECTS_ENV, effects, support

SESSIONS = [f"cli-rec-{i}" for i in range(6)]  # orders 0 and 3 are late: refunded


@pytest.fixture
async def recorded_cli(env, tmp_path, monkeypatch) -> Cli:
    """Six sessions recorded by `support` in a store of the test's own; a Cli on it (no worker)."""
    monkeypatch.setenv(EFFECTS_ENV, str(tmp_path / "effects.jsonl"))
    cli = Cli(
        address=env.client.service_client.config.target_host,
        task_queue=f"rcli-{uuid.uuid4().hex[:8]}",
        store_path=tmp_path / "store.db",
    )
    store = SqliteStore(cli.store_path)
    try:
        async with build_worker(env.client, agents=[support], store=store, task_queue=cli.task_queue):
            client = AgentClient(env.client, store, cli.task_queue)
            await asyncio.gather(
                *(client.send("support", f"Where is order {i}?", session_id=s) for i, s in enumerate(SESSIONS))
            )
    finally:
        store.close()
    return cli


async def test_replay_prints_the_report_writes_json_and_junit_and_gates_on_the_threshold(recorded_cli, tmp_path):
    cli = recorded_cli
    tools_before = len([e for e in effects(str(tmp_path / "effects.jsonl")) if e["kind"] == "tool"])
    same = cli.inproc(
        "replay", *SESSIONS, "--against", "tests.replay_agents:support", "--max-changed", "0",
        "--json", str(tmp_path / "same.json"), "--junit", str(tmp_path / "same.xml"), "--tag", "same",
    )  # fmt: skip
    assert same.returncode == 0, same.stderr
    assert "6 sessions: 6 identical, 6 with the same tools, 0 diverged, 0 failed" in same.stdout
    assert json.loads((tmp_path / "same.json").read_text())["identical"] == 6
    assert ET.parse(tmp_path / "same.xml").getroot().get("failures") == "0"

    strict = cli.inproc(
        "replay", *SESSIONS, "--against", "tests.replay_agents:support_strict", "--max-changed", "0",
        "--junit", str(tmp_path / "strict.xml"), "--tag", "strict", "--score", "same=tests.replay_agents:same_answer",
        "--json", str(tmp_path / "strict.json"),
    )  # fmt: skip
    assert strict.returncode == 1, strict.stderr
    assert "regression: 2 of 6 replayed sessions changed (allowed: 0)" in strict.stderr
    rows = [line.split() for line in strict.stdout.splitlines() if line.startswith("cli-rec-")]
    assert [(r[0], r[1], r[2]) for r in rows[:2]] == [("cli-rec-0", "diverged", "2"), ("cli-rec-3", "diverged", "2")]
    assert "same" in strict.stdout.splitlines()[0] and "score same: mean 0.666667" in strict.stdout
    scores = {
        r["sourceSessionId"]: r["scores"]["same"]
        for r in json.loads((tmp_path / "strict.json").read_text())["sessions"]
    }
    assert scores == {s: 0.0 if s in ("cli-rec-0", "cli-rec-3") else 1.0 for s in SESSIONS}
    failed = [c.get("name") for c in ET.parse(tmp_path / "strict.xml").getroot().iter("testcase") if len(c)]
    assert sorted(failed) == ["cli-rec-0", "cli-rec-3"]
    # the same batch again, with a looser threshold: nothing replayed twice, exit 0
    again = cli.inproc(
        "replay",
        *SESSIONS,
        "--against",
        "tests.replay_agents:support_strict",
        "--max-changed",
        "40%",
        "--tag",
        "strict",
    )
    assert again.returncode == 0, again.stderr
    assert len([e for e in effects(str(tmp_path / "effects.jsonl")) if e["kind"] == "tool"]) == tools_before


async def test_export_then_replay_from_the_file_with_another_store(recorded_cli, tmp_path):
    cli = recorded_cli
    out = cli.inproc("export", "--agent", "support", "-o", str(tmp_path / "runs.jsonl"))
    assert out.returncode == 0, out.stderr
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 6
    other = Cli(cli.address, cli.task_queue, tmp_path / "other.db")
    report = other.inproc(
        "replay", "--dataset", str(tmp_path / "runs.jsonl"), "--against", "tests.replay_agents:support_strict",
        "--json", "-",
    )  # fmt: skip
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert (data["total"], data["identical"], data["diverged"]) == (6, 4, 2)


async def test_fork_batch_selects_sessions_and_reports_each_fork(recorded_cli, tmp_path, env):
    cli = recorded_cli
    store = SqliteStore(cli.store_path)
    try:
        async with build_worker(env.client, agents=[support], store=store, task_queue=cli.task_queue):
            out = await asyncio.to_thread(
                cli.inproc, "fork", "--batch", "--agent", "support", "--status", "finished", "--from-step", "2",
                "--append-input", "And order 4?", "--tag", "more", "--json",
            )  # fmt: skip
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["total"] == 6 and data["identical"] == 0
        assert store.load("cli-rec-1.fork-more").messages[-1].content == "Order 4 is shipped."
    finally:
        store.close()


async def test_bad_input_is_one_clear_line(recorded_cli, tmp_path):
    cli = recorded_cli
    bad_agent = cli.inproc("replay", SESSIONS[0], "--against", "tests.replay_agents")
    one_line_error(bad_agent, 2, "module:attribute")
    missing = cli.inproc("replay", SESSIONS[0], "--against", "tests.nowhere:agent")
    one_line_error(missing, 2, "cannot import 'tests.nowhere'")
    unknown = cli.inproc("replay", "no-such-session", "--against", "tests.replay_agents:support")
    one_line_error(unknown, 2, "no-such-session")
    (tmp_path / "bad.jsonl").write_text('{"sessionId": "x"}\nnot json\n')
    malformed = cli.inproc(
        "replay", "--dataset", str(tmp_path / "bad.jsonl"), "--against", "tests.replay_agents:support"
    )
    one_line_error(malformed, 2, "line 2: malformed JSON")
    threshold = cli.inproc("replay", SESSIONS[0], "--against", "tests.replay_agents:support", "--max-changed", "lots")
    one_line_error(threshold, 2, "threshold 'lots'")
    two = cli.inproc("fork", SESSIONS[0], SESSIONS[1], "--from-step", "1")
    one_line_error(two, 2, "add --batch")


async def test_replay_with_workers_elsewhere_uses_the_replay_workers_queue(recorded_cli, tmp_path, env):
    from durable_agents.replay import build_replay_worker
    from tests.replay_agents import support_strict

    cli = recorded_cli
    store = SqliteStore(cli.store_path)
    queue = f"{cli.task_queue}.replay"  # the default of --workers-elsewhere and of replay-worker
    try:
        async with build_replay_worker(env.client, against=support_strict, store=store, task_queue=queue):
            out = await asyncio.to_thread(
                cli.inproc, "replay", *SESSIONS, "--against", "tests.replay_agents:support_strict",
                "--workers-elsewhere", "--json", "-",
            )  # fmt: skip
    finally:
        store.close()
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["diverged"], json.loads(out.stdout)["identical"]) == (2, 4)
