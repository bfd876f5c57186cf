"""The HTTP API against a real worker: deciding approvals as an authenticated person, the
refusals a user relies on (schema, role, scope, changed arguments, a second approver),
sessions, transcript, diff, fork."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents.web import arguments_digest
from tests.web.agents import AMOUNT, PAYER, RECIPIENT, paid_in
from tests.web.conftest import Served

pytestmark = pytest.mark.integration


async def _detail(served: Served, sid: str, who: str = "alice") -> dict:
    async with served.http(who) as http:
        got = await http.get(f"/api/sessions/{sid}/approval")
    assert got.status_code == 200, got.text
    return got.json()


def _decision(detail: dict, **changes) -> dict:
    return {
        "approvalId": detail["approvalId"],
        "approved": True,
        "argumentsDigest": detail["argumentsDigest"],
        **changes,
    }


async def test_an_approver_decides_a_waiting_call_and_the_run_goes_on(served: Served):
    sid = await served.waiting()
    async with served.http("alice") as http:
        listed = (await http.get("/api/approvals", params={"agent": PAYER, "tool": "pay", "limit": 500})).json()
        mine = [i for i in listed["items"] if i["sessionId"] == sid]
        assert len(mine) == 1, listed
        item = mine[0]
        assert item["arguments"] == {"amount_cents": AMOUNT, "recipient": RECIPIENT}
        assert item["mayDecide"] is True and item["temporalUrl"].endswith(f"/workflows/{sid}")
        assert item["argumentsDigest"] == arguments_digest(item["arguments"])
        decided = await http.post(f"/api/sessions/{sid}/decision", json=_decision(item, note="ok by me"))
    assert decided.status_code == 200, decided.text
    body = decided.json()
    assert body["decision"]["decidedBy"] == "alice"
    assert body["outcome"]["finishReason"] == "stop"
    header = served.store.load_header(sid)
    assert [(d.decided_by, d.approved, d.note) for d in header.decisions] == [("alice", True, "ok by me")]
    assert paid_in(sid) == [{"amount_cents": AMOUNT, "recipient": RECIPIENT}]


async def test_who_decided_comes_from_the_token_never_from_the_body(served: Served):
    sid = await served.waiting()
    detail = await _detail(served, sid)
    async with served.http("alice") as http:
        forged = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, decidedBy="the CEO"))
    assert forged.status_code == 422, forged.text
    assert "decidedBy" in forged.json()["message"]
    assert served.store.load_header(sid).status == "awaiting-approval"


async def test_edited_arguments_that_fail_the_schema_are_refused_and_valid_ones_run(served: Served):
    sid = await served.waiting()
    detail = await _detail(served, sid)
    assert detail["inputSchema"]["properties"]["amount_cents"]["exclusiveMinimum"] == 0
    async with served.http("alice") as http:
        bad = await http.post(
            f"/api/sessions/{sid}/decision", json=_decision(detail, arguments={"amount_cents": -5, "recipient": "x"})
        )
        assert bad.status_code == 422, bad.text
        assert "amount_cents" in bad.json()["message"]
        assert (await http.get(f"/api/sessions/{sid}/approval")).status_code == 200  # still waiting
        edited = {"amount_cents": 1000, "recipient": "ACME Ltd"}
        good = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, arguments=edited))
    assert good.status_code == 200, good.text
    assert paid_in(sid) == [edited]
    assert served.store.load_header(sid).decisions[0].arguments == edited


async def test_a_viewer_and_an_approver_of_other_agents_cannot_decide(served: Served):
    sid = await served.waiting()
    for who in ("victor", "sam"):
        detail = await _detail(served, sid, who)
        assert detail["mayDecide"] is False
        async with served.http(who) as http:
            refused = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail))
        assert refused.status_code == 403, (who, refused.text)
    assert served.store.load_header(sid).status == "awaiting-approval"
    assert paid_in(sid) == []


async def test_a_decision_on_arguments_other_than_the_pending_ones_is_refused(served: Served):
    sid = await served.waiting()
    detail = await _detail(served, sid)
    seen = arguments_digest({"amount_cents": 1, "recipient": RECIPIENT})  # what an outdated page showed
    async with served.http("alice") as http:
        stale = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, argumentsDigest=seen))
        assert stale.status_code == 409, stale.text
        assert stale.json()["code"] == "ARGUMENTS_CHANGED"
        wrong = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, approvalId="not-this-one"))
        assert wrong.status_code == 409, wrong.text
    assert paid_in(sid) == []


async def test_two_approvers_at_once_one_wins_and_the_other_is_told_who(served: Served):
    sid = await served.waiting()
    detail = await _detail(served, sid)
    async with served.http("alice") as alice, served.http("bob") as bob:
        answers = await asyncio.gather(
            alice.post(f"/api/sessions/{sid}/decision", json=_decision(detail)),
            bob.post(f"/api/sessions/{sid}/decision", json=_decision(detail, approved=False, note="no")),
        )
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 409], [a.text for a in answers]
    won = next(a for a in answers if a.status_code == 200).json()["decision"]["decidedBy"]
    lost = next(a for a in answers if a.status_code == 409).json()
    assert lost["decidedBy"] == won and won in lost["message"]
    decisions = served.store.load_header(sid).decisions
    assert [d.decided_by for d in decisions] == [won]
    assert len(paid_in(sid)) == (1 if decisions[0].approved else 0)


async def test_sessions_search_show_transcript_and_diff(served: Served):
    a = await served.waiting(prefix="diffa")
    b = await served.waiting(prefix="diffb")
    for sid, approved in ((a, True), (b, False)):
        detail = await _detail(served, sid)
        async with served.http("alice") as http:
            done = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail, approved=approved))
            assert done.status_code == 200, done.text
    async with served.http("victor") as http:
        found = (await http.get("/api/sessions", params={"q": a[-10:]})).json()
        assert [s["sessionId"] for s in found["items"]] == [a]
        shown = (await http.get(f"/api/sessions/{a}")).json()
        assert shown["header"]["status"] == "finished" and shown["history"], shown
        transcript = (await http.get(f"/api/sessions/{a}/transcript")).json()
        roles = [m["message"]["role"] for m in transcript["messages"]]
        assert roles[-4:] == ["user", "assistant", "tool", "assistant"], roles
        diff = (await http.get("/api/diff", params={"a": a, "b": b})).json()
        assert diff["a"][0]["toolCalls"][0]["name"] == "pay"
        assert diff["b"][0]["toolCalls"][0]["isError"] is True  # rejected: its result is an error
        audit = (await http.get("/api/decisions", params={"limit": 500})).json()
        assert {(e["sessionId"], e["decision"]["approved"]) for e in audit["items"]} >= {(a, True), (b, False)}
        missing = await http.get("/api/sessions/no-such-session/transcript")
        assert missing.status_code == 404


async def test_an_operator_forks_a_session_and_a_viewer_cannot(served: Served):
    sid = await served.waiting(prefix="fork")
    async with served.http("victor") as http:
        refused = await http.post(f"/api/sessions/{sid}/fork", json={"fromStep": 1})
        assert refused.status_code == 403
    async with served.http("olga") as http:
        forked = await http.post(
            f"/api/sessions/{sid}/fork", json={"fromStep": 1, "patch": {"appendInput": "Pay 10.00 instead."}}
        )
    assert forked.status_code == 201, forked.text
    new = forked.json()["sessionId"]
    assert served.store.load_header(new).status == "in-progress"
    assert served.store.load(new).pending_input[0].content == "Pay 10.00 instead."


async def test_a_sub_agents_call_is_decided_in_its_parents_session_and_its_transcript_nests(served: Served):
    sid = served.session("boss")
    paused = await served.client.send("web-boss", "Pay ACME through the team", session_id=sid)
    assert paused.finish_reason == "awaiting-approval"
    async with served.http("alice") as http:
        listed = (await http.get("/api/approvals", params={"agent": "web-payer", "limit": 500})).json()
        item = next(i for i in listed["items"] if i["sessionId"] == sid)
        assert (item["agent"], item["subagentAgent"], item["toolName"]) == ("web-boss", "web-payer", "pay")
        waiting = (await http.get(f"/api/sessions/{sid}/transcript")).json()
        call = next(m for m in waiting["messages"] if m["message"]["role"] == "assistant")
        assert call["subagent"]["agent"] == "web-payer"  # the call the sub-agent waits on carries its transcript
        assert call["subagent"]["messages"][-1]["message"]["toolCalls"][0]["name"] == "pay"
        detail = (await http.get(f"/api/sessions/{sid}/approval")).json()
        assert detail["inputSchema"]["properties"]["amount_cents"]  # the sub-agent's tool's schema
        decided = await http.post(f"/api/sessions/{sid}/decision", json=_decision(detail))
        assert decided.status_code == 200, decided.text
        assert decided.json()["outcome"]["finishReason"] == "stop"
        done = (await http.get(f"/api/sessions/{sid}/transcript")).json()
    result = next(m for m in done["messages"] if m["message"]["role"] == "tool")
    nested = [m["message"]["role"] for m in result["subagent"]["messages"]]
    assert nested[-3:] == ["assistant", "tool", "assistant"], nested
    assert result["subagent"]["agent"] == "web-payer"
