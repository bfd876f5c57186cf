"""One DurableAgentsPlugin for client and worker; build_worker takes interceptors and plugins."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)

from durable_agents import AgentClient, ConfigurationError, DurableAgentsPlugin, build_worker
from durable_agents.converter import EncodedFailureConverter
from tests import agents
from tests.conftest import session_id
from tests.test_security import ReversingCodec


class CountingInterceptor(Interceptor):
    """Records every activity type the worker executes."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        seen = self.seen

        class Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                seen.append(activity.info().activity_type)
                return await super().execute_activity(input)

        return Inbound(next)


@activity.defn(name="app.shout")
async def shout(text: str) -> str:
    return text.upper()


@workflow.defn(name="AppShout", sandboxed=False)  # defined in a test module the sandbox cannot re-import
class AppShout:
    @workflow.run
    async def run(self, text: str) -> str:
        return await workflow.execute_activity(shout, text, start_to_close_timeout=timedelta(seconds=10))


def test_a_client_without_our_converter_is_refused_with_what_to_do(env, store):
    plain = Client(env.client.service_client, namespace=env.client.namespace)
    with pytest.raises(ConfigurationError, match=r"DurableAgentsPlugin\(\)"):
        build_worker(plain, agents=[agents.weather_agent], store=store)


async def test_interceptors_and_plugins_ride_along(env, store, task_queue):
    counting = CountingInterceptor()
    app = SimplePlugin("app", activities=[shout], workflows=[AppShout])
    worker = build_worker(
        env.client,
        agents=[agents.weather_agent],
        store=store,
        task_queue=task_queue,
        interceptors=[counting],
        plugins=[app],
    )
    async with worker:
        result = await AgentClient(env.client, store, task_queue).send(
            "booker", "Book a table for 2 tonight", session_id=session_id()
        )
        shouted = await env.client.execute_workflow(AppShout.run, "hi", id=session_id(), task_queue=task_queue)
    assert result.finish_reason == "stop" and shouted == "HI"
    assert "durable_agents.model_turn" in counting.seen and "durable_agents.execute_tool" in counting.seen
    assert "app.shout" in counting.seen


async def test_plain_temporalio_client_and_worker_with_the_plugin(env, store, task_queue):
    """The converter comes from the client's plugin, keeping the user's codec."""
    client = await Client.connect(
        env.client.service_client.config.target_host,
        namespace=env.client.namespace,
        data_converter=dataclasses.replace(DataConverter.default, payload_codec=ReversingCodec()),
        plugins=[DurableAgentsPlugin()],
    )
    converter = client.data_converter
    assert issubclass(converter.payload_converter_class, PydanticPayloadConverter)
    assert isinstance(converter.payload_codec, ReversingCodec)
    assert converter.failure_converter_class is EncodedFailureConverter
    with pytest.warns(UserWarning, match="same plugin type"):  # temporalio's note; harmless here
        worker = Worker(
            client, task_queue=task_queue, plugins=[DurableAgentsPlugin(agents=[agents.weather_agent], store=store)]
        )
    async with worker:
        result = await AgentClient(client, store, task_queue).send(
            "booker", "Book a table for 2 tonight", session_id=session_id()
        )
    assert result.text == "Booked a table for 2 at Roscioli in Rome."


def test_a_worker_plugin_needs_a_store_for_its_agents():
    with pytest.raises(ConfigurationError, match="store"):
        DurableAgentsPlugin(agents=[agents.weather_agent])
