"""A session's live events as Server-Sent Events: a client that disconnects and comes back
with ``Last-Event-ID`` misses nothing and sees nothing twice, while the run goes on."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.web.conftest import Served

pytestmark = pytest.mark.integration


async def _read(served: Served, sid: str, *, last_id: str | None, stop) -> list[tuple[int, str, dict]]:
    """Events as the stream sends them (id, event, data), until ``stop(events)``; then disconnect."""
    headers = {"Last-Event-ID": last_id} if last_id is not None else {}
    events: list[tuple[int, str, dict]] = []
    async with served.http("victor") as http, http.stream("GET", f"/api/sessions/{sid}/events", headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in r.aiter_lines():
            if line == "":
                if "id" in fields:
                    events.append((int(fields["id"]), fields.get("event", "message"), json.loads(fields["data"])))
                    if stop(events):
                        return events
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
    raise AssertionError(f"the stream ended before the test stopped reading: {events}")


async def test_a_client_that_reconnects_with_last_event_id_misses_nothing_and_sees_nothing_twice(served: Served):
    sid = await served.waiting(stream=True)
    first = await asyncio.wait_for(_read(served, sid, last_id=None, stop=lambda ev: len(ev) == 3), 30)

    # the client comes back (from where it stopped) while the decision resumes the run
    reconnected = asyncio.ensure_future(
        _read(served, sid, last_id=str(first[-1][0]), stop=lambda ev: ev[-1][1] == "run-finished")
    )
    async with served.http("alice") as http:
        detail = (await http.get(f"/api/sessions/{sid}/approval")).json()
        decision = {"approvalId": detail["approvalId"], "approved": True, "argumentsDigest": detail["argumentsDigest"]}
        assert (await http.post(f"/api/sessions/{sid}/decision", json=decision)).status_code == 200
    rest = await asyncio.wait_for(reconnected, 30)
    seen = [offset for offset, _, _ in first + rest]
    stored = [row.offset for row in served.store.read_events(sid)]
    assert seen == stored, (seen, stored)  # every event once, in order, across the reconnection
    kinds = [kind for _, kind, _ in first + rest]
    assert kinds[0] == "run-started" and "run-paused" in kinds and "approval-decided" in kinds
    decided = next(data for _, kind, data in rest if kind == "approval-decided")
    assert decided["decidedBy"] == "alice"
    assert all(data["type"] == kind for _, kind, data in first + rest)
