"""The HTTP API's approval policies and grants (issue 42) against the real server and worker:
an operator sets, reads and clears a policy (checked against the agent's tools by the
worker; a stale expectedVersion is a 409), everyone reads the audit, approvers make and
revoke grants only within what they may decide, malformed bodies are refused."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import httpx
import pytest

from tests.web.agents import PAYER
from tests.web.conftest import Served

pytestmark = pytest.mark.integration

SMALL = {"allow": [{"name": "small", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}]}


async def test_an_operator_sets_reads_and_clears_an_agents_policy(served: Served) -> None:
    path = f"/api/policies/agents/{PAYER}"
    async with served.http("olga") as http:
        current = (await http.get(path)).json()["version"]
        put = await http.put(path, json={"policy": SMALL, "expectedVersion": current})
        assert put.status_code == 200, put.text
        stored = put.json()
        assert stored["version"] == current + 1 and stored["changedBy"] == "olga"
        assert stored["policy"]["allow"][0]["name"] == "small"

        stale = await http.put(path, json={"policy": SMALL, "expectedVersion": current})
        assert stale.status_code == 409 and stale.json()["code"] == "POLICY_VERSION_CONFLICT", stale.text

        wrong = {"allow": [{"name": "w", "tools": ["pay"], "when": [{"arg": "amount", "op": "<", "value": 1}]}]}
        refused = await http.put(path, json={"policy": wrong})
        assert refused.status_code == 400 and "no argument 'amount'" in refused.json()["message"], refused.text
        unknown = await http.put(path, json={"policy": {**SMALL, "approveEverything": True}})
        assert unknown.status_code == 422 and "approveEverything" in unknown.json()["message"], unknown.text
        not_json = await http.put(path, content=b"{not json", headers={"Content-Type": "application/json"})
        assert not_json.status_code == 400, not_json.text
        bad_name = await http.put("/api/policies/agents/no%20such%20agent!", json={"policy": SMALL})
        assert bad_name.status_code == 400, bad_name.text

        cleared = await http.delete(path, params={"expectedVersion": current + 1})
        assert cleared.status_code == 200 and cleared.json().get("policy") is None, cleared.text
    async with served.http("victor") as http:  # a viewer reads, never changes
        assert (await http.get(path)).json()["version"] == current + 2
        assert (await http.put(path, json={"policy": SMALL})).status_code == 403
        changes = (await http.get("/api/policies/changes", params={"agent": PAYER})).json()["changes"]
        assert [(c["toVersion"], c["changedBy"]) for c in changes[:2]] == [(current + 2, "olga"), (current + 1, "olga")]
    async with served.http("alice") as http:  # an approver is not an operator
        assert (await http.delete(path)).status_code == 403


async def test_a_sessions_policy_by_its_encoded_id(served: Served) -> None:
    sid = await served.waiting(prefix="pol/with/slashes")
    path = f"/api/policies/sessions/{quote(sid, safe='')}"
    async with served.http("olga") as http:
        put = await http.put(path, json={"policy": SMALL})
        assert put.status_code == 200, put.text
        assert put.json()["scope"] == {"kind": "session", "name": sid}
        assert (await http.get(path)).json()["version"] == 1
        missing = await http.put("/api/policies/sessions/never-ran", json={"policy": SMALL})
        assert missing.status_code == 404, missing.text


async def test_grants_never_widen_what_the_approver_may_decide(served: Served) -> None:
    sid = await served.waiting(prefix="grant")
    body = {"scope": "session", "sessionId": sid, "tool": "pay", "expiresInSeconds": 600, "maxUses": 3,
            "when": [{"arg": "amount_cents", "op": "<=", "value": 10000}]}  # fmt: skip
    async with served.http("sam") as http:  # an approver of another agent's calls only
        assert (await http.post("/api/grants", json=body)).status_code == 403
        tool_wide = await http.post("/api/grants", json={"scope": "tool", "tool": "pay"})
        assert tool_wide.status_code == 403 and "every agent" in tool_wide.json()["message"]
    async with served.http("victor") as http:
        assert (await http.post("/api/grants", json=body)).status_code == 403
    async with served.http("alice") as http:
        made = await http.post("/api/grants", json=body)
        assert made.status_code == 201, made.text
        grant = made.json()
        assert grant["createdBy"] == "alice" and grant["scope"]["agent"] == PAYER and grant["maxUses"] == 3
        listed = (await http.get("/api/grants", params={"session": sid, "live": "true"})).json()["grants"]
        assert [g["id"] for g in listed if g["scope"].get("sessionId") == sid] == [grant["id"]]
        bad = await http.post("/api/grants", json={**body, "when": [{"arg": "amount", "op": "<", "value": 1}]})
        assert bad.status_code == 400 and "no argument 'amount'" in bad.json()["message"], bad.text
        forged = await http.post("/api/grants", json={**body, "createdBy": "the CEO"})
        assert forged.status_code == 422, forged.text
    async with served.http("sam") as http:
        assert (await http.delete(f"/api/grants/{grant['id']}")).status_code == 403
    async with served.http("bob") as http:
        revoked = await http.delete(f"/api/grants/{grant['id']}")
        assert revoked.status_code == 200 and revoked.json()["revoked"] is True
        assert revoked.json()["grant"]["revokedBy"] == "bob"
        live = (await http.get("/api/grants", params={"session": sid, "live": "true"})).json()["grants"]
        assert [g for g in live if g["scope"].get("sessionId") == sid] == []
        assert (await http.delete("/api/grants/g-none")).status_code == 404


async def test_approve_and_stop_asking_from_the_decision_endpoint(served: Served) -> None:
    from durable_agents.web import TokenFile

    token = TokenFile(served.folder / "tokens.json").add(f"pia-{uuid.uuid4().hex[:6]}", ["approver"], agents=[PAYER])
    sid = await served.waiting(prefix="stop-asking")
    async with served.http("alice") as http:
        detail = (await http.get(f"/api/sessions/{sid}/approval")).json()
    decision = {"approvalId": detail["approvalId"], "approved": True, "argumentsDigest": detail["argumentsDigest"]}
    async with httpx.AsyncClient(base_url=served.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as pia:
        wide = await pia.post(f"/api/sessions/{sid}/decision", json={**decision, "grant": {"scope": "tool"}})
        assert wide.status_code == 403 and "every agent" in wide.json()["message"], wide.text
        rejected = await pia.post(
            f"/api/sessions/{sid}/decision", json={**decision, "approved": False, "grant": {"scope": "agent"}}
        )
        assert rejected.status_code == 422, rejected.text
        made = await pia.post(
            f"/api/sessions/{sid}/decision", json={**decision, "grant": {"scope": "agent", "maxUses": 1}}
        )
        assert made.status_code == 200, made.text
    grants = [g for g in served.client.grants(agent=PAYER) if g.approval_id == detail["approvalId"]]
    assert len(grants) == 1 and grants[0].max_uses == 1 and grants[0].scope.kind == "agent"
    # the next session's same call is approved by the grant, the one after asks again (used up)
    approved = await served.client.send(PAYER, "Pay ACME 42.00", session_id=served.session("granted"))
    assert approved.finish_reason == "stop", approved
    asks = await served.waiting(prefix="asks-again")
    assert served.store.load_header(asks).status == "awaiting-approval"
