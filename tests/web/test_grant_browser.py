""" "Approve and stop asking" from the inbox page (issue 42), in a real headless Chromium against
the real server and worker: the approver picks the grant's scope and how long it holds, approves,
and the grant is in the policy book with the approval it came from, in the approver's name."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.outside_clients.browser import PipeBrowser
from tests.web.agents import PAYER
from tests.web.conftest import Served
from tests.web.test_inbox_browser import in_browser, open_approval, shots, sign_in, until

pytestmark = pytest.mark.integration
__all__ = ["shots"]  # the module fixture that checks Chromium first


async def test_approve_and_stop_asking_for_this_session_for_an_hour(served: Served, shots: Path, tmp_path: Path):
    sid = await served.waiting(prefix="page-grant")

    def steps(browser: PipeBrowser) -> None:
        tab = sign_in(browser, served.url, served.tokens["alice"])
        open_approval(tab, sid)
        tab.evaluate("document.getElementById('grant-scope').value = 'session'")
        tab.evaluate("document.getElementById('grant-for').value = '3600'")
        tab.screenshot(shots / "web-approval-grant.png")
        tab.evaluate("document.getElementById('approve').click()")
        until(
            tab,
            "document.getElementById('decision-done').textContent.includes('approved without asking')",
            "the decision with its grant",
        )

    before = datetime.now(UTC)
    await in_browser(tmp_path, "grant", steps)
    header = served.store.load_header(sid)
    approval_id = header.decisions[0].approval_id
    [grant] = [g for g in served.client.grants(session_id=sid) if g.approval_id == approval_id]
    assert grant.scope.kind == "session" and grant.scope.session_id == sid and grant.scope.agent == PAYER
    assert grant.created_by == "alice"
    assert grant.expires_at is not None and 3500 < (grant.expires_at - before).total_seconds() < 3700
    assert json.loads(grant.to_json())["scope"]["tool"] == "pay"


async def test_the_grants_page_lists_live_grants_and_revokes_one(served: Served, shots: Path, tmp_path: Path):
    sid = await served.waiting(prefix="page-grants")
    grant = served.client.grant("session", "pay", session_id=sid, max_uses=2, by="olga")
    row = f"document.querySelector('tr[data-grant={json.dumps(grant.id)}]')"

    def steps(browser: PipeBrowser) -> None:
        tab = sign_in(browser, served.url, served.tokens["bob"])
        tab.evaluate("location.hash = '#/grants'")
        until(tab, f"!!{row} && {row}.textContent.includes('0 / 2')", "the grant in the list")
        tab.screenshot(shots / "web-grants.png")
        tab.evaluate(f"{row}.querySelector('button').click()")
        until(tab, f"{row}.textContent.includes('revoked')", "the grant revoked")

    await in_browser(tmp_path, "grants", steps)
    [kept] = [g for g in served.client.grants(session_id=sid) if g.id == grant.id]
    assert kept.revoked_by == "bob" and kept.revoked_at is not None
