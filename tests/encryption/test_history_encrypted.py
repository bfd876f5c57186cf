"""With encryption on, Temporal history holds none of a run's text (real dev server).

Every event of a run with tools, of one paused for an approval decided with a
note, and of one a provider failed is checked byte by byte for the run's
strings; the summaries and current details, decrypted, name only agents,
steps, tools and statuses; the search attributes stay readable (names only).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from durable_agents import AgentClient, DurableAgentsError, ModelProviderError, build_worker, connect
from durable_agents.checkpoint.encryption import KEYS_ENV, new_key
from durable_agents.encryption import ENCODING, KEY_ID_METADATA, EncryptionCodec, EncryptionKeyError
from durable_agents.workflows.contracts import AgentRunInput
from tests import agents
from tests.conftest import session_id
from tests.fakes.llm_server import FakeLLMServer
from tests.test_providers_e2e import _agent

K1, K2 = new_key("k1"), new_key("k2")


async def _encrypted(env, keys: str = K1) -> Client:
    return await connect(env.client.service_client.config.target_host, codec=EncryptionCodec(keys))


async def _events(client: Client, workflow_id: str) -> list[HistoryEvent]:
    return list((await client.get_workflow_handle(workflow_id).fetch_history()).events)


def _payloads(message: ProtoMessage) -> list[Payload]:
    """Every Payload inside a protobuf message (history events nest them deeply), but
    search attributes': Temporal indexes those, so no codec touches them (they hold names only)."""
    found = []
    for field, value in message.ListFields():
        if field.message_type is None or field.name == "search_attributes":
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        else:
            items = [value] if isinstance(value, ProtoMessage) else list(value)
        for item in items:
            if isinstance(item, Payload):
                found.append(item)
            elif isinstance(item, ProtoMessage):
                found.extend(_payloads(item))
    return found


LOCAL_ACTIVITY_MARKER_FIELDS = frozenset(
    {"seq", "attempt", "activity_id", "activity_type", "complete_time", "backoff", "original_schedule_time"}
    | {"activation_index"}
)
"""What the SDK core records of a local activity call in its marker, unencoded."""


def _encoded_payloads(event: HistoryEvent) -> list[Payload]:
    """The event's payloads that went through the codec: the SDK core's own records aside,
    which it writes unencoded and which hold no user content (checked here): a
    ``workflow.patched()`` marker (its patch id), and a local activity marker's ``data``
    (seq, attempt, activity type, times), whose result is encoded like any payload."""
    marker = event.marker_recorded_event_attributes
    if marker.marker_name == "core_patch":
        return []
    if marker.marker_name != "core_local_activity":
        return _payloads(event)
    core = marker.details["data"].payloads
    assert core and all(p.metadata["encoding"] == b"json/plain" for p in core)
    assert set(json.loads(core[0].data)) <= LOCAL_ACTIVITY_MARKER_FIELDS, core[0].data
    result = [p for key, ps in marker.details.items() if key != "data" for p in ps.payloads]
    assert result, (event.event_id, "a local activity marker without its result")
    return result


def assert_nothing_readable(events: list[HistoryEvent], strings: list[str]) -> None:
    assert events
    for event in events:
        raw = event.SerializeToString()
        for text in strings:
            assert text.encode() not in raw, f"{text!r} readable in event {event.event_id} ({event.event_type})"
        payloads = _encoded_payloads(event)
        for payload in payloads:
            assert payload.metadata["encoding"] == ENCODING, (event.event_id, payload.metadata)


async def _decrypted_metadata(codec: EncryptionCodec, events: list[HistoryEvent]) -> list[str]:
    """The summaries of the run and its activities (user metadata), decrypted."""
    texts = []
    for event in events:
        if event.HasField("user_metadata"):
            for part in (event.user_metadata.summary, event.user_metadata.details):
                if part.data:
                    [plain] = await codec.decode([part])
                    texts.append(plain.data.decode())
    return texts


async def test_a_run_with_tools_leaves_no_text_in_history(env, store, task_queue):
    client = await _encrypted(env)
    codec = client.data_converter.payload_codec
    sid = session_id()
    async with build_worker(client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        result = await AgentClient(client, store, task_queue).send(
            "booker", "Book a table for 2 tonight near Marguerite", session_id=sid
        )
    assert result.text == "Booked a table for 2 at Roscioli in Rome."
    events = await _events(env.client, sid)
    strings = ["Book a table", "Marguerite", "Paris", "Rome", "Roscioli", "Checking the weather", "rain", "BK-"]
    assert_nothing_readable(events, strings)
    assert b"booker" in b"".join(e.SerializeToString() for e in events)  # the AgentName search attribute

    summaries = await _decrypted_metadata(codec, events)
    assert '"booker"' in summaries  # the run's summary: the agent only (default with encryption)
    assert any("tool book_table" in s for s in summaries) and any("model turn 1" in s for s in summaries)
    for text in summaries:
        assert not any(s in text for s in strings), text


async def test_an_approval_with_a_note_leaves_no_text_in_history(env, store, task_queue):
    client = await _encrypted(env)
    sid = session_id()
    async with build_worker(client, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        agent_client = AgentClient(client, store, task_queue)
        paused = await agent_client.send("payments", "Charge Okafor-Holdings for the lunch", session_id=sid)
        assert paused.finish_reason == "awaiting-approval"
        # the current details, as the UI reads them (a query), decrypted: names, ids and the
        # pending call's arguments (what the approver must see), readable only through the codec
        metadata = await client.get_workflow_handle(sid).query("__temporal_workflow_metadata")
        assert metadata.current_details == (
            f'step 1 · awaiting approval {paused.approval_id} for charge_card\narguments: {{"amount": 10}}'
        )
        first = await agent_client.approve(
            sid, note="note-Quokka-19: fine, customer agreed", arguments={"amount": 73912846}, decided_by="alice@corp"
        )
        done = await agent_client.reject(sid, first.approval_id, note="reject-Pangolin-3", decided_by="alice@corp")
    assert done.finish_reason == "stop"
    assert [d.note for d in store.load_header(sid).decisions] == [
        "note-Quokka-19: fine, customer agreed",
        "reject-Pangolin-3",
    ]
    strings = [
        "Okafor-Holdings",
        "note-Quokka-19",
        "73912846",  # long enough not to turn up by chance in an id (a UUID held "4242" once)
        "reject-Pangolin-3",
        "alice@corp",
        "Looking up",
        "All calls",
    ]
    assert_nothing_readable(await _events(env.client, sid), strings)


async def test_a_provider_error_leaves_no_text_in_history(env, store, task_queue, monkeypatch):
    client = await _encrypted(env)
    with FakeLLMServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        server.anthropic.reply_tool_calls([("get_weather", {"city": "Zanzibar-Town"}, "toolu_1")])
        server.anthropic.reply_error(400, "prompt mentions Zanzibar-7781, which is not allowed")
        sid = session_id()
        async with build_worker(client, agents=[_agent("anthropic")], store=store, task_queue=task_queue):
            with pytest.raises(ModelProviderError, match="Zanzibar-7781"):  # the caller still reads it
                await AgentClient(client, store, task_queue).send(
                    "anthropic-agent", "Weather in Zanzibar?", session_id=sid
                )
    events = await _events(env.client, sid)
    assert_nothing_readable(events, ["Zanzibar", "sun", "You check the weather"])
    assert b"Encoded failure" in b"".join(e.SerializeToString() for e in events)
    assert "Zanzibar-7781" in store.load_header(sid).last_error.message  # the store says why


async def test_first_line_summaries_are_shown_only_when_asked_for(env, store, task_queue):
    client = await _encrypted(env)
    sid = session_id()
    async with build_worker(client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        await AgentClient(client, store, task_queue, summaries="first-line").send(
            "booker", "Book a table\nfor two", session_id=sid
        )
    assert await (await client.get_workflow_handle(sid).describe()).static_summary() == "booker: Book a table"
    assert AgentClient(env.client, store).summaries == "first-line"  # the default without encryption


async def test_rotation_across_a_live_session(env, store, task_queue):
    """A session paused under k1 is approved by a client and worker rotated to k1+k2:
    history written with k1 still reads; everything written after uses k2."""
    sid = session_id()
    old = await _encrypted(env, K1)
    async with build_worker(old, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        paused = await AgentClient(old, store, task_queue).send("payments", "Charge it", session_id=sid)
    written_before = len(await _events(env.client, sid))

    rotated = await _encrypted(env, f"{K1},{K2}")
    async with build_worker(rotated, agents=[agents.payments_agent], store=store, task_queue=task_queue):
        again = AgentClient(rotated, store, task_queue)
        second = await again.approve(sid, paused.approval_id)
        done = await again.approve(sid, second.approval_id)
    assert done.finish_reason == "stop" and done.text == "All calls have results."

    events = await _events(env.client, sid)
    ids = [{p.metadata[KEY_ID_METADATA] for p in _encoded_payloads(e)} for e in events]
    assert set().union(*ids[:written_before]) == {b"k1"}
    assert set().union(*ids[written_before:]) == {b"k2"}
    started = events[0].workflow_execution_started_event_attributes.input.payloads
    assert await rotated.data_converter.decode(started, [AgentRunInput])
    with pytest.raises(EncryptionKeyError, match="key id 'k1', which is not among the keys"):  # k1 retired too soon
        await EncryptionCodec(K2).decode(started)


async def test_connect_and_build_worker_read_the_keys_from_the_environment(env, store, task_queue, monkeypatch):
    monkeypatch.setenv(KEYS_ENV, K2)
    client = await connect(env.client.service_client.config.target_host)
    assert isinstance(client.data_converter.payload_codec, EncryptionCodec)
    # a worker built from a client without a codec still encrypts what it writes
    sid = session_id()
    async with build_worker(env.client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        await asyncio.wait_for(
            AgentClient(client, store, task_queue).send("booker", "Book Roscioli", session_id=sid), 60
        )
    assert_nothing_readable(await _events(env.client, sid), ["Roscioli", "Book"])


async def test_a_worker_or_client_without_the_keys_says_so(env, store, task_queue):
    """Not ``Unknown payload encoding``, nor a run that waits forever: the missing keys,
    named. A worker without them fails the run at once (its checkpoint stays resumable);
    a client without them cannot read a result."""
    client = await _encrypted(env)
    sid = session_id()
    async with build_worker(env.client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        with pytest.raises(
            DurableAgentsError, match=r"key id 'k1'\), and this worker or client has no encryption keys"
        ):
            await asyncio.wait_for(AgentClient(client, store, task_queue).send("booker", "Hi", session_id=sid), 30)

    done = session_id()
    async with build_worker(client, agents=[agents.weather_agent], store=store, task_queue=task_queue):
        await AgentClient(client, store, task_queue).send("booker", "Book Roscioli", session_id=done)
    with pytest.raises(EncryptionKeyError, match=r"key id 'k1'\), and this worker or client has no encryption keys"):
        await env.client.get_workflow_handle(done).result()
