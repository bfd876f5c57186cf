"""Whether the namespace has durable-agents' search attributes registered."""

from __future__ import annotations

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.service import RPCError

from durable_agents.workflows.search import SEARCH_ATTRIBUTES


async def search_attributes_registered(client: Client) -> bool:
    """True when every attribute exists; runs skip upserts otherwise (they would fail)."""
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=client.namespace)
        )
    except RPCError:
        return False  # e.g. no permission to list: stay safe and set none
    return all(name in listed.custom_attributes for name in SEARCH_ATTRIBUTES)
