"""Session ids and Temporal's 1,000-byte workflow id limit: new sessions are refused over
900 bytes (forks derive their ids from it), and fork workflow ids always fit."""

from __future__ import annotations

import pytest

from durable_agents.checkpoint.format import Checkpoint, Message
from durable_agents.client import MAX_SESSION_ID_BYTES, TEMPORAL_ID_LIMIT, fork_workflow_id
from durable_agents.errors import ConfigurationError
from tests.agents import weather_agent


def _seed(store, session_id: str) -> None:
    """A session as an older version, without the limit, left it: unfinished, at its first input."""
    store.save(Checkpoint(session_id=session_id, agent="booker", messages=[Message.user("Book a table for 2")]))


async def test_a_1000_character_session_id_can_be_forked_and_the_fork_resumed(run_worker, store):
    sid = "s" * TEMPORAL_ID_LIMIT  # the longest workflow id Temporal takes
    _seed(store, sid)
    async with run_worker([weather_agent]) as client:
        ran = await client.resume(sid)  # an existing session runs up to Temporal's own limit
        assert ran.finish_reason == "stop" and ran.steps == 3
        made = await client.fork(sid, 1, new_session_id="short-fork")
        assert made.session_id == "short-fork"
        forked = await client.resume(made.session_id)
        assert forked.finish_reason == "stop"


@pytest.mark.parametrize(
    "sid", ["x" * (MAX_SESSION_ID_BYTES + 1), "é" * 451, "y" * 1000], ids=["901", "902-utf8", "1000"]
)
async def test_send_refuses_a_new_session_id_over_900_bytes(run_worker, store, sid):
    async with run_worker([weather_agent]) as client:
        with pytest.raises(ConfigurationError) as raised:
            await client.send("booker", "hi", session_id=sid)
        with pytest.raises(ConfigurationError):
            await client.start("booker", "hi", session_id=sid)
    message = raised.value.message
    assert f"{len(sid.encode())} bytes" in message and "900 bytes" in message and "1,000" in message, message
    assert ".fork-" in message, message  # why the room
    assert store.load_header(sid) is None  # nothing started


async def test_a_new_session_id_of_900_bytes_runs(run_worker):
    async with run_worker([weather_agent]) as client:
        result = await client.send("booker", "Book a table for 2", session_id="é" * 450)
    assert result.finish_reason == "stop"


async def test_an_existing_session_over_temporals_limit_is_refused_naming_it(run_worker, store):
    sid = "z" * (TEMPORAL_ID_LIMIT + 1)
    _seed(store, sid)
    async with run_worker([weather_agent]) as client:
        with pytest.raises(ConfigurationError, match="1,000-byte"):
            await client.resume(sid)


@pytest.mark.parametrize("size", [0, 1, 10, 200, 985, 986, 987, 999, 1000, 1001, 5000])
def test_fork_workflow_ids_always_fit(size):
    for sid in ("a" * size, "é" * size, "日" * size):
        workflow_id = fork_workflow_id(sid)
        assert len(workflow_id.encode()) <= TEMPORAL_ID_LIMIT, (size, len(workflow_id.encode()))
        assert workflow_id.startswith("fork-" + sid[:10])


def test_fork_workflow_ids_keep_short_ids_whole_and_tell_long_ones_apart():
    assert fork_workflow_id("chat-42").startswith("fork-chat-42-")
    a, b = "q" * 999 + "a", "q" * 999 + "b"  # the same prefix, different sessions
    assert fork_workflow_id(a).rsplit("-", 1)[0] != fork_workflow_id(b).rsplit("-", 1)[0]
    assert fork_workflow_id(a).rsplit("-", 1)[0] == fork_workflow_id(a).rsplit("-", 1)[0]  # stable but for the nonce
    assert fork_workflow_id(a) != fork_workflow_id(a)  # two forks of one session are two workflows
