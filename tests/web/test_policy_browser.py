"""An approval policy changed from the inbox page (issue 42), in a real headless Chromium against the
real server and worker: an operator opens an agent's policy, saves a rule (the worker checks it
against the agent's tools), is told why a rule on an argument the tool lacks is refused and that
someone else changed the policy meanwhile, and clears it; the changes are listed; a viewer reads
the policy but cannot change it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from durable_agents.checkpoint.policy_book import PolicyScope, policy_book_for
from tests.outside_clients.browser import PipeBrowser, Tab
from tests.web.agents import PAYER
from tests.web.conftest import Served
from tests.web.test_inbox_browser import go, in_browser, shots, sign_in, until

pytestmark = pytest.mark.integration
__all__ = ["shots"]  # the module fixture that checks Chromium first

SMALL = {"allow": [{"name": "small", "tools": ["pay"], "when": [{"arg": "amount_cents", "op": "<=", "value": 5000}]}]}
WRONG = {"allow": [{"name": "w", "tools": ["pay"], "when": [{"arg": "amount", "op": "<", "value": 1}]}]}


def type_policy(tab: Tab, text: str) -> None:
    tab.evaluate(f"document.getElementById('policy-text').value = {json.dumps(text)}")


def said(tab: Tab, element: str, text: str, what: str) -> None:
    until(
        tab, f"(document.getElementById({json.dumps(element)}) || {{}}).textContent?.includes({json.dumps(text)})", what
    )


async def test_an_operator_sets_and_clears_an_agents_policy_from_the_page(served: Served, shots: Path, tmp_path: Path):
    book, scope = policy_book_for(served.store), PolicyScope.of_agent(PAYER)
    before = book.policy(scope).version

    def steps(browser: PipeBrowser) -> None:
        tab = sign_in(browser, served.url, served.tokens["olga"])
        go(tab, "#/policies")
        until(tab, "!!document.getElementById('policy-pick')", "the policy picker")
        tab.evaluate(f"document.getElementById('policy-target').value = {json.dumps(PAYER)}")
        tab.evaluate("document.getElementById('policy-pick').requestSubmit()")
        until(tab, "!!document.getElementById('policy-save')", "the policy editor")

        type_policy(tab, "{not json")
        tab.evaluate("document.getElementById('policy-save').click()")
        said(tab, "policy-error", "not JSON", "that the text is not JSON")

        type_policy(tab, json.dumps(WRONG))
        tab.evaluate("document.getElementById('policy-save').click()")
        said(tab, "policy-error", "no argument 'amount'", "the worker's refusal of a rule on an argument pay lacks")

        type_policy(tab, json.dumps(SMALL))
        tab.evaluate("document.getElementById('policy-save').click()")
        said(tab, "policy-done", f"saved as version {before + 1}", "the saved version")
        said(tab, "policy-state", "by olga", "who changed it")
        until(
            tab, f"!!document.querySelector('#policy-changes tr[data-version=\"{before + 1}\"]')", "the change listed"
        )
        tab.screenshot(shots / "web-policy.png")

        shown = json.loads(tab.evaluate("document.getElementById('policy-text').value"))
        assert "version" not in shown and shown["allow"][0]["when"][0]["value"] == 5000, shown
        tab.evaluate("const t = document.getElementById('policy-text'); t.value = t.value.replace('5000', '6000')")
        tab.evaluate("document.getElementById('policy-save').click()")  # the document shown, edited
        said(tab, "policy-done", f"saved as version {before + 2}", "the edited policy saved")

        book.set_policy(scope, SMALL, by="someone-else", now=datetime.now(UTC))  # meanwhile, elsewhere
        tab.evaluate("document.getElementById('policy-clear').click()")
        said(tab, "policy-error", "someone-else", "that someone else changed it meanwhile")

        tab.evaluate("location.reload()")
        until(tab, "!!document.getElementById('policy-clear')", "the editor again")
        said(tab, "policy-state", f"version {before + 3}", "the version changed meanwhile")
        tab.evaluate("document.getElementById('policy-clear').click()")
        said(tab, "policy-done", f"cleared (version {before + 4})", "the policy cleared")

    try:
        await in_browser(tmp_path, "policy", steps)
    finally:  # whatever happened, the agent's other tests find no policy
        if book.policy(scope).policy is not None:
            book.clear_policy(scope, by="test", now=datetime.now(UTC))
    changes = book.policy_changes(scope, limit=4)
    assert [(c.to_version, c.changed_by, c.cleared) for c in changes] == [
        (before + 4, "olga", True),
        (before + 3, "someone-else", False),
        (before + 2, "olga", False),
        (before + 1, "olga", False),
    ]
    edited = changes[2].new_policy
    assert edited is not None and edited.allow[0].name == "small" and edited.allow[0].when[0].value == 6000


async def test_a_viewer_reads_a_policy_and_cannot_change_it(served: Served, shots: Path, tmp_path: Path):
    book, scope = policy_book_for(served.store), PolicyScope.of_agent(PAYER)
    book.set_policy(scope, SMALL, by="olga", now=datetime.now(UTC))

    def steps(browser: PipeBrowser) -> tuple[bool, bool, str]:
        tab = sign_in(browser, served.url, served.tokens["victor"])
        go(tab, f"#/policies?agent={PAYER}")
        until(tab, "(document.getElementById('policy-text') || {}).value?.includes('amount_cents')", "the policy")
        return (
            tab.evaluate("document.getElementById('policy-text').readOnly"),
            tab.evaluate("!!document.getElementById('policy-save') || !!document.getElementById('policy-clear')"),
            tab.evaluate("document.getElementById('policy').textContent"),
        )

    try:
        read_only, buttons, text = await in_browser(tmp_path, "policy-viewer", steps)
    finally:
        book.clear_policy(scope, by="test", now=datetime.now(UTC))
    assert read_only and not buttons and "an operator changes it" in text


async def test_the_audit_page_says_what_the_evaluator_said_and_what_it_took(
    served: Served, shots: Path, tmp_path: Path
):
    book, scope = policy_book_for(served.store), PolicyScope.of_agent(PAYER)
    criteria = {"name": "payments", "tools": ["pay"], "purpose": "pays money", "approveWhen": ["small amounts"]}
    auto = {"evaluator": {"python": "tests.policy_agents:judge_sure"}, "criteria": [criteria], "minConfidence": 0.8}
    stored = book.set_policy(scope, {"auto": auto}, by="olga", now=datetime.now(UTC))
    sid = served.session("page-evaluator")
    try:
        await served.client.send(PAYER, "Pay ACME 42.00", session_id=sid)
        assert (await served.client.result(sid)).finish_reason == "stop"  # the evaluator approved
    finally:
        book.clear_policy(scope, by="test", now=datetime.now(UTC))
    [decision] = served.store.load(sid).decisions
    assert decision.evaluation is not None and decision.evaluation.latency_ms is not None
    row = f"[...document.querySelectorAll('#audit tr')].find((r) => r.textContent.includes({json.dumps(sid)}))"

    def steps(browser: PipeBrowser) -> str:
        tab = sign_in(browser, served.url, served.tokens["victor"])
        go(tab, "#/audit")
        until(tab, f"!!{row}", "the evaluator's decision in the audit")
        return tab.evaluate(f"{row}.textContent")

    text = await in_browser(tmp_path, "audit-evaluator", steps)
    assert f"evaluator (payments, 0.95) · policy v{stored.version}" in text
    assert "small payment by payments" in text  # its reasoning, as the decision's reason
    assert f"the evaluator's verdict approve in {int(decision.evaluation.latency_ms + 0.5)} ms" in text  # (JS rounding)
