"""`approve --arguments` too large for Temporal: one clear line naming the limit, exit 1,
before anything is sent; the call still waits (issue 41)."""

from __future__ import annotations

import json

from durable_agents.activities.contracts import MAX_DECISION_BYTES
from durable_agents.client.result import RunResult
from tests.cli.conftest import Cli, one_line_error, session_id


def test_approve_with_arguments_over_the_limit_is_one_line_naming_it_and_the_call_still_waits(cli: Cli):
    sid = session_id("big")
    paused = RunResult.model_validate_json(cli.ok("run", "payments", "Charge the customer", "--session", sid, "--json"))
    assert paused.finish_reason == "awaiting-approval"
    big = json.dumps({"amount": 11, "memo": "m" * (MAX_DECISION_BYTES + 1)})  # in process: over argv's own limit
    err = one_line_error(cli.inproc("approve", sid, "--arguments", big), 1, "edited arguments too large")
    assert f"the limit is {MAX_DECISION_BYTES:,} bytes" in err and len(err) < 500, err
    waiting = [v for v in cli.read_json("approvals") if v["sessionId"] == sid]
    assert [v["approvalId"] for v in waiting] == [paused.approval_id]
    out = cli.ok("approve", sid, "--arguments", '{"amount": 11}')
    assert '"charged": 11' in out
