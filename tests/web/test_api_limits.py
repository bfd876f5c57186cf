"""The HTTP API's edges (issue 41): a body nested too deep is a malformed body (400, not a
crash); a decision too large for Temporal is refused before anything is sent (413, the
limit named) and the call still waits; a decision the run has not recorded is never
answered as taken; any session id, one ending in ``/approval`` too, reaches its own routes."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from urllib.parse import quote

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.service import RPCError

from durable_agents.activities.contracts import MAX_DECISION_BYTES
from durable_agents.checkpoint.format import Checkpoint, Message
from durable_agents.web import TokenFile, create_app
from tests.web.agents import AMOUNT, RECIPIENT, paid_in
from tests.web.conftest import Served

pytestmark = pytest.mark.integration

DEEP = '{"a":' * 1000 + "1" + "}" * 1000
"""A 2 KB body nested 1,000 levels deep: Python's JSON parser gives up (RecursionError)."""
UPDATES = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
}


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


async def _detail(http: httpx.AsyncClient, sid: str) -> dict:
    got = await http.get(f"/api/sessions/{quote(sid, safe='')}/approval")
    assert got.status_code == 200, got.text
    return got.json()


def _decision(detail: dict, **changes) -> dict:
    return {
        "approvalId": detail["approvalId"],
        "approved": True,
        "argumentsDigest": detail["argumentsDigest"],
        **changes,
    }


async def _updates_in_history(served: Served, sid: str) -> list[int]:
    history = await served.client.temporal.get_workflow_handle(sid).fetch_history()
    return [e.event_type for e in history.events if e.event_type in UPDATES]


# -- 1. bodies nested too deep -------------------------------------------------------------
async def test_a_body_nested_1000_levels_deep_is_a_400_like_any_malformed_body(served: Served):
    sid = await served.waiting(prefix="deep")
    target = f"/api/sessions/{sid}"
    json_headers = {"Content-Type": "application/json"}
    async with served.http("olga") as http:  # operator and approver: every body-taking route
        for method, path in (("POST", f"{target}/decision"), ("POST", f"{target}/fork"), ("POST", "/api/login")):
            malformed = await http.request(method, path, content=b"{not json", headers=json_headers)
            deep = await http.request(method, path, content=DEEP.encode(), headers=json_headers)
            assert malformed.status_code == 400, (path, malformed.text)
            assert deep.status_code == 400, (path, deep.text)
            assert deep.json().keys() == malformed.json().keys(), (deep.json(), malformed.json())
            assert deep.json()["code"] == malformed.json()["code"] == "BAD_REQUEST"
        # parsed by Python, but deeper than Temporal's JSON converter reads: refused here, not a 500 later
        detail = await _detail(http, sid)
        edited = {"amount_cents": AMOUNT, "recipient": RECIPIENT, "tree": _nested(300)}
        deep_arguments = await http.post(f"{target}/decision", json=_decision(detail, arguments=edited))
        assert deep_arguments.status_code == 400, deep_arguments.text
        assert "nested" in deep_arguments.json()["message"]
        assert (await _detail(http, sid))["approvalId"] == detail["approvalId"]  # still waiting
        decided = await http.post(f"{target}/decision", json=_decision(detail))
    assert decided.status_code == 200, decided.text
    assert paid_in(sid) == [{"amount_cents": AMOUNT, "recipient": RECIPIENT}]


# -- 2. decisions too large for Temporal ---------------------------------------------------
async def test_edited_arguments_too_large_for_temporal_are_refused_up_front_and_the_call_still_waits(
    served: Served,
):
    sid = await served.waiting(prefix="big")
    big = {"amount_cents": 1000, "recipient": "ACME Ltd", "memo": "m" * (3 * 1024 * 1024)}  # fits the schema
    updates_before = await _updates_in_history(served, sid)  # its start's wait_outcome
    async with served.http("alice") as http:
        detail = await _detail(http, sid)
        refused = await asyncio.wait_for(
            http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, arguments=big)), 15
        )
        assert refused.status_code == 413, refused.text
        problem = refused.json()
        assert problem["code"] == "DECISION_TOO_LARGE"
        assert "edited arguments too large: 3,145,7" in problem["message"]
        assert f"the limit is {MAX_DECISION_BYTES:,} bytes" in problem["message"]
        # nothing was sent to the run: no update in its history, nothing recorded, the call still waits
        assert await _updates_in_history(served, sid) == updates_before
        assert served.store.load_header(sid).decisions in (None, [])
        assert (await _detail(http, sid))["approvalId"] == detail["approvalId"]
        assert (await http.get(f"/api/sessions/{sid}")).status_code == 200
        # just under the limit goes through Temporal and runs
        near = {"amount_cents": 1000, "recipient": "ACME Ltd", "memo": "m" * (MAX_DECISION_BYTES - 200)}
        decided = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, arguments=near))
    assert decided.status_code == 200, decided.text
    assert decided.json()["outcome"]["finishReason"] == "stop"
    assert paid_in(sid) == [{"amount_cents": 1000, "recipient": "ACME Ltd"}]
    assert served.store.load_header(sid).decisions[0].arguments == near


async def test_a_decision_the_run_has_not_recorded_is_never_answered_as_taken(served: Served):
    """The run cannot record the decision within the request's wait (another process holds the
    store's write lock): the answer says it is not recorded, not that it was decided."""
    sid = await served.waiting(prefix="slow")
    app = create_app(served.client, tokens=TokenFile(served.folder / "tokens.json"), decide_wait=1.0)
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    headers = {"Authorization": f"Bearer {served.tokens['alice']}"}
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", headers=headers) as http:
        detail = await _detail(http, sid)
        other = sqlite3.connect(served.store.path, isolation_level=None)  # another process's connection
        try:
            other.execute("BEGIN IMMEDIATE")  # the run's record of the decision waits for this lock
            answer = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail))
            recorded_then = served.store.load_header(sid).decisions
        finally:
            with contextlib.suppress(sqlite3.Error):
                other.execute("ROLLBACK")
            other.close()
    assert recorded_then in (None, [])
    assert answer.status_code == 504, answer.text
    problem = answer.json()
    assert problem["code"] == "DECISION_NOT_RECORDED" and "not recorded" in problem["message"], problem
    done = await asyncio.wait_for(served.client.outcome(sid), 60)  # the run took it once the lock was free
    assert done.finish_reason == "stop"
    assert [d.decided_by for d in served.store.load_header(sid).decisions] == ["alice"]


# -- 3. session ids that end like a route ----------------------------------------------------
@pytest.mark.parametrize("suffix", ["approval", "decision", "transcript", "events", "fork"])
async def test_a_session_id_ending_in_a_routes_name_reaches_its_own_session(served: Served, suffix: str):
    sid = f"{served.session('route')}/{suffix}"
    served.store.save(Checkpoint(session_id=sid, agent="web-payer", messages=[Message.user("hi")]))
    async with served.http("victor") as http:
        shown = await http.get(f"/api/sessions/{quote(sid, safe='')}")
        assert shown.status_code == 200, shown.text
        assert shown.json()["header"]["sessionId"] == sid
        transcript = await http.get(f"/api/sessions/{quote(sid, safe='')}/transcript")
        assert transcript.status_code == 200, transcript.text
        assert transcript.json()["sessionId"] == sid


async def test_a_waiting_session_whose_id_ends_in_approval_is_shown_and_decided(served: Served):
    sid = f"{served.session('route')}/approval"
    paused = await served.client.send("web-payer", "Pay ACME 42.00", session_id=sid)
    assert paused.finish_reason == "awaiting-approval"
    encoded = quote(sid, safe="")
    async with served.http("alice") as http:
        shown = await http.get(f"/api/sessions/{encoded}")
        assert shown.status_code == 200, shown.text
        assert shown.json()["header"]["sessionId"] == sid and shown.json()["pending"]["sessionId"] == sid
        detail = await _detail(http, sid)
        assert detail["sessionId"] == sid and detail["approvalId"] == paused.approval_id
        events = await http.get(f"/api/sessions/{encoded}/events", params={"follow": "false"})
        assert events.status_code == 200, events.text
        assert events.headers["content-type"].startswith("text/event-stream")
        decided = await http.post(f"/api/sessions/{encoded}/decision", json=_decision(detail))
        assert decided.status_code == 200, decided.text
        # the same ids with their slashes as they are still reach the same routes
        plain = await http.get(f"/api/sessions/{sid}/transcript")
        assert plain.status_code == 200 and plain.json()["sessionId"] == sid, plain.text
    assert paid_in(sid) == [{"amount_cents": AMOUNT, "recipient": RECIPIENT}]


# -- reads while the run cannot answer ---------------------------------------------------------
async def test_reads_while_the_runs_workflow_task_fails_answer_from_the_store_not_500(served: Served):
    """An outside client's update over Temporal's own 2 MB limit fails the run's workflow task
    (retried for a while, then the update fails): meanwhile the run answers no query at once.
    The session and its waiting call are read from the store; a decision is refused, never a 500."""
    sid = await served.waiting(prefix="stuck")
    handle = served.client.temporal.get_workflow_handle(sid)
    pending = await served.client.pending_approval(sid)
    huge = {"approvalId": pending.approval_id, "approved": True, "arguments": {"memo": "m" * (3 * 1024 * 1024)}}
    update = asyncio.ensure_future(handle.execute_update("decide", huge))
    try:
        for _ in range(300):  # until the run's workflow task is in its failed state
            try:
                await handle.query("pending_approval")
            except RPCError:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the run kept answering queries")
        async with served.http("alice") as http:
            shown = await http.get(f"/api/sessions/{sid}")
            detail = await http.get(f"/api/sessions/{sid}/approval")
            decided = await http.post(
                f"/api/sessions/{sid}/decision",
                json={"approvalId": pending.approval_id, "approved": True, "argumentsDigest": "sha256:00"},
            )
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(update, 60)
    assert shown.status_code == 200, shown.text
    assert shown.json()["pending"]["approvalId"] == pending.approval_id
    assert detail.status_code == 200 and detail.json()["approvalId"] == pending.approval_id, detail.text
    # Refused either way, never a 500: while the task fails, the run does not answer (502); a
    # query sent during one of the task's retries waits for it and may be answered once Temporal
    # gives up on the update (~20 s), and then the bogus digest is what refuses it (409).
    refusals = {502: "RUN_NOT_ANSWERING", 409: "ARGUMENTS_CHANGED"}
    assert refusals.get(decided.status_code) == decided.json()["code"], decided.text
    assert not served.store.load_header(sid).decisions
