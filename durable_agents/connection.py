"""Connecting to Temporal the way Temporal's own tools do.

Address, namespace, API key, TLS and profiles come from
``temporalio.envconfig`` (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_PROFILE``, the config file), and the pydantic
data converter is always used. A payload codec (e.g. encryption) can be
passed without changing anything else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.envconfig import ClientConfig

from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.plugin import DurableAgentsPlugin, with_our_converter

__all__ = ["DEFAULT_TASK_QUEUE", "connect"]

DEFAULT_TASK_QUEUE = "durable-agents"


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter, with ``codec`` when given (failure messages encoded too)."""
    return with_our_converter(dataclasses.replace(pydantic_data_converter, payload_codec=codec))


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    profile: str | None = None,
    codec: PayloadCodec | None = None,
) -> Client:
    config: dict[str, Any] = dict(ClientConfig.load_client_connect_config(profile=profile))
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", "localhost:7233")
    try:
        return await Client.connect(**config, data_converter=data_converter(codec), plugins=[DurableAgentsPlugin()])
    except RuntimeError as e:
        reason = "connection refused" if "refused" in str(e).lower() else str(e)
        raise ConfigurationError(
            f"cannot reach Temporal at {config['target_host']} ({reason}); start one with "
            "`durable-agents server`, or point TEMPORAL_ADDRESS at yours"
        ) from e
