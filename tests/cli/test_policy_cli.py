"""``durable-agents policy …`` and ``grants …`` as processes (issue 42): a policy set through the
package's worker (checked against the agent's tools there), shown, audited, cleared; grants
added, listed, revoked; and ``policy test``, the backtest, over 1,000 decisions recorded in a
store, with the counts they must give (table, JSON, and the exit code CI relies on)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.client import RunResult
from tests.cli.conftest import Cli, one_line_error, session_id
from tests.recorded_decisions import CANDIDATE, T0, write_recorded_decisions

pytestmark = pytest.mark.integration

PAYMENTS_POLICY = {
    "allow": [{"name": "small", "tools": ["charge_card"], "when": [{"arg": "amount", "op": "<=", "value": 15}]}]
}


def write(tmp_path: Path, name: str, value: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return str(path)


def test_set_show_history_clear_through_the_worker(cli: Cli, tmp_path: Path) -> None:
    policy = write(tmp_path, "policy.json", PAYMENTS_POLICY)
    out = cli.ok("policy", "set", "--agent", "payments", "--file", policy, "--expected-version", "0", "--by", "alice")
    assert "set: agent 'payments': version 1" in out and "alice" in out, out
    shown = cli.read_json("policy", "show", "--agent", "payments")
    assert shown["version"] == 1 and shown["policy"]["allow"][0]["name"] == "small"
    assert "version 1" in cli.read("policy", "show", "--agent", "payments")

    # another writer came first: refused, one line, nothing changed
    err = one_line_error(
        cli("policy", "set", "--agent", "payments", "--file", policy, "--expected-version", "0"), 1, "version 1"
    )
    assert "alice" in err
    # a rule on an argument the tool lacks is refused when set (by the worker, which has the agent)
    wrong = write(tmp_path, "wrong.json", {"allow": [{"name": "w", "tools": ["charge_card"],
                                                        "when": [{"arg": "cents", "op": "<", "value": 1}]}]})  # fmt: skip
    one_line_error(cli("policy", "set", "--agent", "payments", "--file", wrong), 2, "no argument 'cents'")
    unknown = write(tmp_path, "unknown.json", {**PAYMENTS_POLICY, "approveEverything": True})
    one_line_error(cli("policy", "set", "--agent", "payments", "--file", unknown), 2, "approveEverything")
    one_line_error(
        cli("policy", "set", "--agent", "payments", "--file", str(tmp_path / "none.json")), 2, "cannot be read"
    )

    out = cli.ok("policy", "clear", "--agent", "payments", "--by", "bob", "--expected-version", "1")
    assert "cleared: agent 'payments': version 2, no policy (cleared)" in out, out
    history = cli.read_json("policy", "history", "--agent", "payments")
    assert [(c["fromVersion"], c["toVersion"], c["changedBy"]) for c in history] == [(1, 2, "bob"), (0, 1, "alice")]
    table = cli.read("policy", "history")
    assert "v0 -> v1" in table and "v1 -> v2" in table and "cleared" in table


def test_grants_add_list_revoke(cli: Cli) -> None:
    sid = session_id("grant")
    paused = RunResult.model_validate_json(cli.ok("run", "payments", "Charge the customer", "--session", sid, "--json"))
    assert paused.finish_reason == "awaiting-approval"
    made = json.loads(
        cli.ok("grants", "add", "--tool", "charge_card", "--session", sid, "--for", "10m", "--uses", "2",
               "--when", '{"arg": "amount", "op": "<=", "value": 50}', "--by", "alice", "--json")
    )  # fmt: skip
    assert made["scope"] == {"kind": "session", "tool": "charge_card", "agent": "payments", "sessionId": sid,
                             "when": [{"arg": "amount", "op": "<=", "value": 50}]}  # fmt: skip
    assert made["maxUses"] == 2 and made["expiresAt"] and made["createdBy"] == "alice"
    listed = cli.read_json("grants", "list", "--session", sid, "--live")
    assert [g["id"] for g in listed] == [made["id"]]
    assert f"{made['id']}  [live]  charge_card in session {sid}" in cli.read("grants", "list", "--agent", "payments")

    one_line_error(
        cli("grants", "add", "--tool", "charge_card", "--agent", "payments", "--when", '{"arg": "cents", "op": "<", "value": 1}'),
        2,
        "no argument 'cents'",
    )  # fmt: skip
    one_line_error(
        cli("grants", "add", "--tool", "charge_card", "--agent", "payments", "--for", "soon"), 2, "invalid duration"
    )

    out = cli.ok("grants", "revoke", made["id"], "--by", "bob")
    assert f"revoked {made['id']}" in out and "bob" in out
    assert cli.read_json("grants", "list", "--session", sid, "--live") == []
    assert "revoked already" in cli.ok("grants", "revoke", made["id"])
    assert f"{made['id']}  [revoked by bob]" in cli.read("grants", "list", "--session", sid)
    one_line_error(cli("grants", "revoke", "g-nope"), 2, "no grant 'g-nope'")
    cli.ok("reject", sid)


def test_a_sessions_effective_policy_keeps_its_agents_deny_rules(cli: Cli, tmp_path: Path) -> None:
    sid = session_id("effective")
    paused = RunResult.model_validate_json(cli.ok("run", "payments", "Charge the customer", "--session", sid, "--json"))
    assert paused.finish_reason == "awaiting-approval"
    deny = {
        "deny": [{"name": "no-big", "tools": ["charge_card"], "when": [{"arg": "amount", "op": ">", "value": 100}]}]
    }
    here = ["--check-against", "tests.agents:payments_agent"]
    cli.ok("policy", "set", "--agent", "payments", "--file", write(tmp_path, "deny.json", deny), *here)
    cli.ok("policy", "set", "--session", sid, "--file", write(tmp_path, "allow.json", PAYMENTS_POLICY), *here)
    effective = cli.read_json("policy", "show", "--session", sid, "--effective")
    assert [r["name"] for r in effective["deny"]] == ["no-big"] and [r["name"] for r in effective["allow"]] == ["small"]
    one_line_error(
        cli.inproc("policy", "show", "--agent", "payments", "--effective"), 2, "--effective is for a session"
    )
    cli.ok("policy", "clear", "--agent", "payments")
    cli.ok("reject", sid)


def test_no_worker_for_the_queue_is_one_line_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    policy = write(tmp_path, "policy.json", PAYMENTS_POLICY)
    out = cli("policy", "set", "--agent", "payments", "--file", policy, "--timeout", "2", "--task-queue", "nobody-here")
    one_line_error(out, 1, "no worker on task queue 'nobody-here'")
    assert "nothing was changed" in out.stderr


def test_set_checked_against_an_agent_here_without_temporal(cli: Cli, tmp_path: Path) -> None:
    store = Cli(cli.address, cli.task_queue, tmp_path / "here.db")
    policy = write(tmp_path, "policy.json", PAYMENTS_POLICY)
    no_temporal = ["--address", "127.0.0.1:1"]  # nothing listens: the change must not need Temporal
    out = store.ok("policy", "set", "--agent", "payments", "--file", policy, "--check-against", "tests.agents:payments_agent",
                   *no_temporal)  # fmt: skip
    assert "set: agent 'payments': version 1" in out, out
    wrong = write(tmp_path, "wrong.json", {"allow": [{"name": "w", "tools": ["refund"]}]})
    one_line_error(
        store(
            "policy", "set", "--agent", "payments", "--file", wrong, "--check-against", "tests.agents:payments_agent"
        ),
        2,
        "no tool 'refund'",
    )
    one_line_error(
        store(
            "policy", "set", "--agent", "weather", "--file", policy, "--check-against", "tests.agents:payments_agent"
        ),
        2,
        "not --agent 'weather'",
    )


# -- the backtest over 1,000 recorded decisions ------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, cli: Cli):
    folder = tmp_path_factory.mktemp("backtest")
    store = SqliteStore(folder / "store.db")
    expected = write_recorded_decisions(store, 1000)
    store.close()
    policy = folder / "candidate.json"
    policy.write_text(json.dumps(CANDIDATE))
    runner = Cli(cli.address, cli.task_queue, folder / "store.db")
    return runner, str(policy), expected


def test_policy_test_counts_1000_recorded_decisions(recorded) -> None:
    runner, policy, expected = recorded
    report = json.loads(runner.ok("policy", "test", "--policy", policy, "--json", "-"))
    assert report["total"] == expected.total == 1000
    assert report["wouldApproveRejected"] == expected.would_approve_rejected == 11
    assert (report["agree"], report["wouldApproveEdited"], report["wouldDenyApproved"], report["wouldAskPerson"]) == (
        expected.agree,
        expected.would_approve_edited,
        expected.would_deny_approved,
        expected.would_ask_person,
    )
    assert report["byRule"]["small"]["against"] == expected.would_approve_rejected + expected.would_approve_edited

    table = runner.ok("policy", "test", "--policy", policy)
    assert "1000 recorded decisions" in table
    assert any("would approve what people rejected" in line and " 11 " in line + " " for line in table.splitlines())
    assert "the count that matters" in table and "examples:" in table

    only = json.loads(runner.ok("policy", "test", "--policy", policy, "--agent", "billing", "--json", "-"))
    assert only["total"] == expected.by_agent["billing"] == 200
    since = (T0 + timedelta(minutes=500)).isoformat()
    assert json.loads(runner.ok("policy", "test", "--policy", policy, "--since", since, "--json", "-"))["total"] == 500


def test_policy_test_fails_ci_over_the_threshold(recorded, tmp_path: Path) -> None:
    runner, policy, _ = recorded
    over = runner("policy", "test", "--policy", policy, "--max-would-approve-rejected", "10")
    assert over.returncode == 1, (over.stdout, over.stderr)
    assert "would approve 11 call(s) people rejected, over --max-would-approve-rejected 10" in over.stderr
    assert "would approve what people rejected" in over.stdout  # the table still says where
    report_file = tmp_path / "report.json"
    at = runner("policy", "test", "--policy", policy, "--max-would-approve-rejected", "11", "--json", str(report_file))
    assert at.returncode == 0, (at.stdout, at.stderr)
    assert json.loads(report_file.read_text())["wouldApproveRejected"] == 11
    one_line_error(
        runner("policy", "test", "--policy", write(tmp_path, "bad.json", {"allow": [{"name": "x"}]})), 2, "tools"
    )


def test_a_policy_for_a_session_that_has_not_run_names_its_agent(cli: Cli, tmp_path: Path) -> None:
    sid = session_id("unrun")
    policy = write(tmp_path, "policy.json", PAYMENTS_POLICY)
    one_line_error(cli("policy", "set", "--session", sid, "--file", policy), 2, "name its agent too")
    one_line_error(cli("policy", "set", "--file", policy), 2, "name the policy's --agent or its --session")
    # the agent named with it: checked against that agent's tools by its worker, kept as the session's
    wrong = write(tmp_path, "wrong.json", {"allow": [{"name": "w", "tools": ["charge_card"],
                                                        "when": [{"arg": "cents", "op": "<", "value": 1}]}]})  # fmt: skip
    one_line_error(
        cli("policy", "set", "--session", sid, "--agent", "payments", "--file", wrong), 2, "no argument 'cents'"
    )
    out = cli.ok("policy", "set", "--session", sid, "--agent", "payments", "--file", policy, "--by", "carol")
    assert "version 1" in out and "carol" in out, out
    assert cli.read_json("policy", "show", "--session", sid)["policy"]["allow"][0]["name"] == "small"
    assert cli.read_json("policy", "show", "--agent", "payments")["policy"] is None  # the agent's own: untouched
    cli.ok("policy", "clear", "--session", sid)
