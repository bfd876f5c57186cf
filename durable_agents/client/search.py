"""Which of durable-agents' search attributes the namespace has registered."""

from __future__ import annotations

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError

from durable_agents.workflows.search import AGENT_STORE, RUN_ATTRIBUTES


async def registered_attributes(client: Client) -> tuple[bool, bool]:
    """Whether runs may upsert their attributes (all of ``RUN_ATTRIBUTES`` exist; the
    upserts would fail otherwise), and whether ``AgentStore`` exists."""
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError:
        return False, False  # e.g. no permission to list: stay safe and set none
    names = listed.custom_attributes
    return all(name in names for name in RUN_ATTRIBUTES), AGENT_STORE.name in names
