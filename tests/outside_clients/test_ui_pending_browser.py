"""A real Chromium opens the embedded dev server's Temporal UI on a run that waits for an
approval: the run's page must show the pending call's arguments (the amount) while it waits.

The UI 2.54 of ``temporal server start-dev`` shows a run's Current Details on its "User
Metadata" tab, rendered in a frame (``iframe#user-metadata-current-details``, its text in
the frame's ``/render?content=…`` URL); its "Queries" tab lists the run's queries and shows
a query's result once "Run Query" is pressed. Chromium comes from
scripts/ensure-chromium.sh (never a skip); it is driven over its DevTools pipe
(``tests/outside_clients/browser.py``) because the page of a running workflow never goes
idle. Screenshots are kept in ``tests/artifacts/`` (gitignored).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import unquote

import pytest
from temporalio.client import Client

from durable_agents import AgentClient, build_worker
from durable_agents.checkpoint import SqliteStore
from durable_agents.client.connection import data_converter
from durable_agents.devserver import DevServer, free_port
from tests.cli.test_ui_browser import ARTIFACTS, chromium, visible_text
from tests.outside_clients.agents import AGENT_NAME, AMOUNT_CENTS, RECIPIENT, payer
from tests.outside_clients.browser import pipe_browser
from tests.outside_clients.conftest import USER_TEXT, terminate_running

pytestmark = pytest.mark.integration

UI_WAIT = 30.0
"""Seconds the page gets to show what the test looks for."""


@dataclass
class Waiting:
    """A run of ``payer`` waiting for its approval, on a dev server with the UI."""

    ui_url: str
    session_id: str
    run_id: str
    folder: Path

    @property
    def link(self) -> str:
        return f"{self.ui_url}/namespaces/default/workflows/{self.session_id}/{self.run_id}"


@pytest.fixture(scope="module")
async def waiting_run(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Waiting]:
    chromium()  # first: a missing browser fails before anything starts
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("ui-outside-*.png"):  # keep only this run's screenshots
        old.unlink()
    folder = tmp_path_factory.mktemp("ui-outside")
    store = SqliteStore(folder / "store.db")
    task_queue = f"tq-ui-{uuid.uuid4().hex[:8]}"
    # free ports, so a dev server of the user's on 7233/8233 is never in the way
    async with DevServer(ui=True, db_file=folder / "temporal.db", port=free_port(), ui_port=free_port()) as server:
        client = await Client.connect(server.address, data_converter=data_converter())
        sid = f"ui-{uuid.uuid4().hex[:8]}"
        # the worker stays up: the UI asks it for the run's Current Details and queries
        async with build_worker(client, agents=[payer], store=store, task_queue=task_queue):
            try:
                agents = AgentClient(client, store, task_queue)
                result = await asyncio.wait_for(agents.send(AGENT_NAME, USER_TEXT, session_id=sid), 30)
                assert result.finish_reason == "awaiting-approval", result
                run_id = (await client.get_workflow_handle(sid).describe()).run_id
                yield Waiting(server.ui_url, sid, run_id, folder)
            finally:
                await terminate_running(client, [sid])
    store.close()


def _frame_text(page: str, frame_id: str) -> str:
    """What the frame shows: its rendered text when readable, else the text its URL carries."""
    rendered = re.search(rf'<frame-text id="{frame_id}">(.*?)</frame-text>', page, re.S)
    if rendered and rendered.group(1) != "(not readable)":
        return rendered.group(1)
    src = re.search(rf'<iframe(?=[^>]*id="{frame_id}")[^>]*>', page)
    content = re.search(r'src="[^"]*?content=([^"&]*)', src.group(0)) if src else None
    return unquote(unescape(content.group(1))) if content else ""


def _shows_arguments(text: str) -> bool:
    return str(AMOUNT_CENTS) in text and RECIPIENT in text


async def test_the_ui_shows_the_pending_calls_arguments_in_the_runs_current_details(waiting_run: Waiting):
    shot = ARTIFACTS / f"ui-outside-{waiting_run.session_id}-details.png"

    def look() -> str:
        with pipe_browser(waiting_run.folder / "profile-details", waiting_run.folder / "chromium-1.log") as browser:
            tab = browser.open(f"{waiting_run.link}/user-metadata")
            page = tab.wait_for(
                lambda page: _shows_arguments(_frame_text(page, "user-metadata-current-details")), timeout=UI_WAIT
            )
            tab.screenshot(shot)
            return page

    page = await asyncio.to_thread(look)  # the loop stays free: the UI's queries reach the worker
    details = _frame_text(page, "user-metadata-current-details")
    assert details, f"the run's page shows no Current Details (screenshot {shot}): {visible_text(page)[-2000:]}"
    assert "charge_card" in details, details
    assert _shows_arguments(details), (
        f"the run's Current Details in the UI do not show the pending call's arguments "
        f"(amount_cents {AMOUNT_CENTS}, recipient {RECIPIENT}): {details!r} (screenshot {shot})"
    )


def _query_result(text: str) -> str | None:
    """The query result the Queries tab shows (a JSON block after "JSON Formatting"), once
    it names the tool call (the queries' descriptions above it do not hold ``"toolName"``)."""
    shown = re.search(r"JSON Formatting › (.*?)(?=Click to copy content|$)", text)
    if shown is None or ("toolName" not in shown.group(1) and "tool_name" not in shown.group(1)):
        return None
    return shown.group(1)


async def test_the_ui_queries_tab_shows_the_pending_approval_with_its_arguments(waiting_run: Waiting):
    shot = ARTIFACTS / f"ui-outside-{waiting_run.session_id}-query.png"

    def look() -> tuple[bool, str]:
        with pipe_browser(waiting_run.folder / "profile-query", waiting_run.folder / "chromium-2.log") as browser:
            tab = browser.open(f"{waiting_run.link}/query")  # pending_approval is the query chosen first
            tab.wait_for(lambda page: "Run Query" in page and "pending_approval" in page, timeout=UI_WAIT)
            clicked = tab.click("Run Query")
            page = tab.wait_for(lambda page: _query_result(visible_text(page)) is not None, timeout=UI_WAIT)
            tab.screenshot(shot)
            return clicked, page

    clicked, page = await asyncio.to_thread(look)
    assert clicked, f"the Queries tab has no Run Query button (screenshot {shot}): {visible_text(page)[-2000:]}"
    text = visible_text(page)
    result = _query_result(text)
    assert result is not None, f"the Queries tab shows no pending_approval result (screenshot {shot}): {text[-3000:]}"
    assert '"toolName" : "charge_card"' in result, result
    assert f'"amount_cents" : {AMOUNT_CENTS}' in result and f'"recipient" : "{RECIPIENT}"' in result, (
        f"the pending approval the UI shows does not carry the call's arguments (screenshot {shot}): {result}"
    )
