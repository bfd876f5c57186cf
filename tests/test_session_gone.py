"""A session removed from the store under a live run stops that run with a typed
error naming it: never an endless retry, never a hang."""

from __future__ import annotations

import asyncio

import pytest

from durable_agents import CheckpointNotFoundError
from tests import agents
from tests.conftest import session_id


async def test_approving_a_session_deleted_while_it_waited_fails_at_once_naming_it(run_worker, store):
    sid = session_id()
    async with run_worker([agents.payments_agent]) as client:
        paused = await client.send("payments", "Charge me", session_id=sid)
        store.delete(sid)  # e.g. `prune` before it learned to keep waiting sessions
        with pytest.raises(CheckpointNotFoundError, match=sid) as raised:
            await asyncio.wait_for(client.approve(sid, paused.approval_id), 30)
    assert "not in" in str(raised.value) and "run stops" in str(raised.value)
