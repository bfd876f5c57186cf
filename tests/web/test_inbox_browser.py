"""The web inbox in a real headless Chromium (driven over its DevTools pipe,
``tests/outside_clients/browser.py``; Chromium from scripts/ensure-chromium.sh, never a
skip) against the real server and worker: a person signs in with a token and decides.

Screenshots of the inbox, an approval and a diff go to ``tests/artifacts/web-*.png``
(gitignored)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.cli.test_ui_browser import ARTIFACTS, chromium
from tests.outside_clients.browser import PipeBrowser, Tab, pipe_browser
from tests.web.agents import AMOUNT, READER, RECIPIENT, paid_in
from tests.web.conftest import Served

pytestmark = pytest.mark.integration

WAIT = 30.0
"""Seconds the page gets to show what a step waits for."""


def until(tab: Tab, expression: str, what: str, timeout: float = WAIT) -> Any:
    """Evaluate ``expression`` in the page every 0.2 s until it is truthy; fail saying ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = tab.evaluate(expression)
        if value:
            return value
        if time.monotonic() > deadline:
            text = tab.evaluate("document.body ? document.body.innerText : ''")
            raise AssertionError(f"the page never showed {what}; it shows: {str(text)[-1500:]}")
        time.sleep(0.2)


def text_of(tab: Tab, element_id: str) -> str:
    return str(tab.evaluate(f"(document.getElementById({json.dumps(element_id)}) || {{}}).textContent || ''"))


def sign_in(browser: PipeBrowser, url: str, token: str) -> Tab:
    tab = browser.open(url)
    until(tab, "!!document.getElementById('token')", "the sign-in form")
    tab.evaluate(f"document.getElementById('token').value = {json.dumps(token)}")
    tab.evaluate("document.getElementById('login').requestSubmit()")
    until(tab, "!!document.getElementById('whoami')", "who is signed in")
    return tab


def go(tab: Tab, hash_: str) -> None:
    tab.evaluate(f"location.hash = {json.dumps(hash_)}")


def phone(tab: Tab) -> None:
    """The page as a phone shows it (390 × 844 CSS pixels, touch)."""
    metrics = {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True}
    tab._browser.send("Emulation.setDeviceMetricsOverride", metrics, session=tab._session)


def open_approval(tab: Tab, sid: str) -> None:
    go(tab, f"#/approval/{sid}")
    until(tab, "!!document.getElementById('approve') && !!document.getElementById('conversation')", "the approval")


@pytest.fixture(scope="module")
def shots() -> Path:
    chromium()  # a missing browser fails first
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


async def in_browser(folder: Path, name: str, steps: Callable[[PipeBrowser], Any]) -> Any:
    """Run ``steps`` with a fresh Chromium, in a thread: the server shares this event loop."""

    def run() -> Any:
        with pipe_browser(folder / f"profile-{name}", folder / f"chromium-{name}.log") as browser:
            return steps(browser)

    return await asyncio.to_thread(run)


async def test_a_person_approves_a_waiting_call_from_the_page_and_the_run_goes_on(
    served: Served, shots: Path, tmp_path: Path
):
    sid = await served.waiting(prefix="page")

    def steps(browser: PipeBrowser) -> str:
        tab = sign_in(browser, served.url, served.tokens["alice"])
        until(tab, f"[...document.querySelectorAll('.approval')].some(e => e.dataset.session === {json.dumps(sid)})",
              "the waiting call in the inbox")  # fmt: skip
        tab.screenshot(shots / "web-inbox.png")
        open_approval(tab, sid)
        shown = text_of(tab, "arguments")
        tab.screenshot(shots / "web-approval.png")
        phone(tab)
        wide = tab.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert wide <= 0, f"on a phone the approval page is {wide} px wider than the screen"
        tab.screenshot(shots / "web-approval-phone.png")
        tab.evaluate("document.getElementById('note').value = 'fine'")
        tab.evaluate("document.getElementById('approve').click()")
        until(tab, "document.getElementById('decision-done').textContent.includes('Approved by alice')", "the decision")
        return shown

    shown = await in_browser(tmp_path, "approve", steps)
    assert json.loads(shown) == {"amount_cents": AMOUNT, "recipient": RECIPIENT}
    header = served.store.load_header(sid)
    assert header.status == "finished" and header.finish_reason == "stop"
    assert [(d.decided_by, d.note) for d in header.decisions] == [("alice", "fine")]
    assert paid_in(sid) == [{"amount_cents": AMOUNT, "recipient": RECIPIENT}]


async def test_an_edited_argument_that_fails_the_schema_is_refused_in_the_form(served: Served, tmp_path: Path):
    sid = await served.waiting(prefix="edit")

    def steps(browser: PipeBrowser) -> str:
        tab = sign_in(browser, served.url, served.tokens["alice"])
        open_approval(tab, sid)
        tab.evaluate("document.getElementById('edit').click()")
        tab.evaluate("document.getElementById('arg-amount_cents').value = '-5'")
        tab.evaluate("document.getElementById('approve').click()")
        return until(tab, "document.getElementById('decision-error').textContent", "a refusal")

    refusal = await in_browser(tmp_path, "edit", steps)
    assert "Not sent" in refusal and "amount_cents" in refusal and "more than 0" in refusal, refusal
    assert not [a for a in served.answered if a[1] == f"/api/sessions/{sid}/decision"]  # nothing was sent
    assert served.store.load_header(sid).status == "awaiting-approval" and paid_in(sid) == []


async def test_hostile_markup_in_a_tool_result_and_arguments_shows_as_text_and_runs_nothing(
    served: Served, tmp_path: Path
):
    sid = await served.waiting(READER, prefix="xss")

    def steps(browser: PipeBrowser) -> dict:
        tab = sign_in(browser, served.url, served.tokens["victor"])
        open_approval(tab, sid)
        until(tab, "document.getElementById('conversation').textContent.includes('Great offer')", "the tool result")
        on_approval = {
            "pwned": tab.evaluate("typeof window.__pwned === 'undefined' ? null : String(window.__pwned)"),
            "text": tab.evaluate("document.body.innerText"),
            "elements": tab.evaluate("document.querySelectorAll('main script, main img, [onerror]').length"),
        }
        go(tab, f"#/session/{sid}")
        until(tab, "!!document.querySelector('.transcript')", "the transcript")
        on_session = {
            "pwned": tab.evaluate("typeof window.__pwned === 'undefined' ? null : String(window.__pwned)"),
            "elements": tab.evaluate("document.querySelectorAll('main script, main img, [onerror]').length"),
            "text": tab.evaluate("document.querySelector('.transcript').innerText"),
        }
        return {"approval": on_approval, "session": on_session}

    seen = await in_browser(tmp_path, "xss", steps)
    for where, page in seen.items():
        assert page["pwned"] is None, f"{where}: the page ran the transcript's markup ({page['pwned']})"
        assert page["elements"] == 0, f"{where}: the transcript's markup became elements"
        assert "<script>window.__pwned" in page["text"] and "onerror=" in page["text"], (where, page["text"][-800:])


async def test_a_viewer_cannot_approve_from_the_page(served: Served, tmp_path: Path):
    sid = await served.waiting(prefix="viewer")

    def steps(browser: PipeBrowser) -> dict:
        tab = sign_in(browser, served.url, served.tokens["victor"])
        open_approval(tab, sid)
        disabled = tab.evaluate("document.getElementById('approve').disabled")
        # and past the disabled button: the page's own session, its CSRF token, a hand-made request
        tab.evaluate(f"""(async () => {{
            const csrf = document.cookie.split('; ').find(c => c.startsWith('da_csrf=')).slice(8);
            const detail = await (await fetch('api/sessions/{sid}/approval')).json();
            const r = await fetch('api/sessions/{sid}/decision', {{method: 'POST',
              headers: {{'Content-Type': 'application/json', 'X-CSRF-Token': csrf}},
              body: JSON.stringify({{approvalId: detail.approvalId, approved: true, argumentsDigest: detail.argumentsDigest}})}});
            window.__status = r.status;
        }})()""")
        return {"disabled": disabled, "status": until(tab, "window.__status", "the forced request's answer")}

    seen = await in_browser(tmp_path, "viewer", steps)
    assert seen == {"disabled": True, "status": 403}
    assert served.store.load_header(sid).status == "awaiting-approval" and paid_in(sid) == []


@pytest.fixture
async def attacker() -> AsyncIterator[tuple[str, list[str]]]:
    """Another origin (another port) whose page forges a decision for whoever visits it."""
    pages: dict[str, str] = {}

    async def page(request):
        return HTMLResponse(pages.get(request.path_params["name"], ""))

    app = Starlette(routes=[Route("/{name}", page)])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", pages  # type: ignore[misc]
    finally:
        server.should_exit = True
        await serving


async def test_a_forged_cross_site_post_is_refused(served: Served, attacker, tmp_path: Path):
    sid = await served.waiting(prefix="csrf")
    async with served.http("alice") as http:
        detail = (await http.get(f"/api/sessions/{sid}/approval")).json()
    site, pages = attacker
    target = f"{served.url}/api/sessions/{sid}/decision"
    body = json.dumps(
        {"approvalId": detail["approvalId"], "approved": True, "argumentsDigest": detail["argumentsDigest"]}
    )
    name, value = body[:-1] + ', "x": "', '"}'  # a text/plain form whose body is this JSON
    pages["form"] = (
        f'<form method="POST" action="{target}" enctype="text/plain"><input name=\'{name}\' value=\'{value}\'></form>'
        "<script>document.forms[0].submit()</script>"
    )
    pages["fetch"] = (
        f"<script>fetch({json.dumps(target)}, {{method: 'POST', mode: 'no-cors', credentials: 'include', "
        f"headers: {{'Content-Type': 'text/plain'}}, body: {json.dumps(body)}}}).finally(() => document.title = 'sent')</script>"
    )

    def steps(browser: PipeBrowser) -> None:
        tab = sign_in(browser, served.url, served.tokens["alice"])  # the victim is signed in (cookie)
        tab.evaluate(f"location.href = {json.dumps(site + '/fetch')}")
        until(tab, "document.title === 'sent'", "the forged fetch sent")
        tab.evaluate(f"location.href = {json.dumps(site + '/form')}")
        until(tab, f"location.href.startsWith({json.dumps(served.url)})", "the forged form submitted")

    await in_browser(tmp_path, "csrf", steps)
    posts = [
        status for method, path, status in served.answered if method == "POST" and path.endswith(f"{sid}/decision")
    ]
    assert posts == [403, 403], posts  # both arrived (with the victim's cookie) and both were refused
    assert served.store.load_header(sid).status == "awaiting-approval" and paid_in(sid) == []


async def test_two_approvers_at_once_on_the_page_one_wins_and_the_other_is_told(served: Served, tmp_path: Path):
    sid = await served.waiting(prefix="race")
    ready = threading.Barrier(2, timeout=60)

    def person(name: str) -> Callable[[PipeBrowser], str]:
        def steps(browser: PipeBrowser) -> str:
            tab = sign_in(browser, served.url, served.tokens[name])
            open_approval(tab, sid)
            ready.wait()  # both pages show the call: both press Approve now
            tab.evaluate("document.getElementById('approve').click()")
            return str(until(tab, "document.getElementById('decision-done').textContent || "
                                  "document.getElementById('decision-error').textContent", "the answer"))  # fmt: skip

        return steps

    alice, bob = await asyncio.gather(
        in_browser(tmp_path, "alice", person("alice")), in_browser(tmp_path, "bob", person("bob"))
    )
    won = [who for who, said in (("alice", alice), ("bob", bob)) if said.startswith("Approved by")]
    assert len(won) == 1, (alice, bob)
    lost = bob if won == ["alice"] else alice
    assert lost.startswith("Not decided") and f"{won[0]} approved this call first" in lost, lost
    assert [d.decided_by for d in served.store.load_header(sid).decisions] == won
    assert len(paid_in(sid)) == 1


async def test_a_side_by_side_diff_of_two_runs(served: Served, shots: Path, tmp_path: Path):
    a, b = await served.waiting(prefix="sxs-a"), await served.waiting(prefix="sxs-b")
    await served.client.approve(a, decided_by="alice")
    await served.client.reject(b, note="not today", decided_by="bob")

    def steps(browser: PipeBrowser) -> str:
        tab = sign_in(browser, served.url, served.tokens["victor"])
        go(tab, f"#/diff?a={a}&b={b}")
        until(tab, "document.querySelectorAll('#diff .diff-row').length >= 3", "the diff")
        tab.screenshot(shots / "web-diff.png")
        return str(tab.evaluate("document.getElementById('diff').innerText"))

    shown = await in_browser(tmp_path, "diff", steps)
    # approved and rejected: their first steps differ in the call's result, side by side
    assert "They diverge at step 1" in shown, shown
    assert "paid_cents" in shown and "rejected by a human reviewer" in shown and "not today" in shown, shown
