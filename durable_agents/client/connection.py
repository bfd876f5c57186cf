"""Connecting to Temporal the way Temporal's own tools do.

Address, namespace, API key, TLS and profiles come from
``temporalio.envconfig`` (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``,
``TEMPORAL_API_KEY``, ``TEMPORAL_PROFILE``, the config file), and the pydantic
data converter is always used. A payload codec (e.g. encryption) can be
passed without changing anything else; without one, the encryption keys of
``DURABLE_AGENTS_ENCRYPTION_KEYS`` / ``DURABLE_AGENTS_ENCRYPTION_KEY_FILE``
turn on ``EncryptionCodec`` (see ``durable_agents.encryption``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from temporalio.client import Client
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from durable_agents._defaults import DEFAULT_TASK_QUEUE
from durable_agents.checkpoint.errors import ConfigurationError
from durable_agents.converter import OUR_DATA_CONVERTER, with_our_converter

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider
    from temporalio.plugin import SimplePlugin

__all__ = ["DEFAULT_TASK_QUEUE", "connect"]


def data_converter(codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter, with ``codec`` when given (failure messages encoded too)."""
    return with_our_converter(dataclasses.replace(OUR_DATA_CONVERTER, payload_codec=codec))


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    profile: str | None = None,
    codec: PayloadCodec | None = None,
    runtime: Runtime | None = None,
    tracing: bool | TracerProvider = False,
) -> Client:
    """A client with the pydantic converter and ``DurableAgentsPlugin``.

    ``codec``: default, the configured encryption (None when no keys are set).
    ``runtime``: e.g. one exporting metrics (``durable_agents.observability.metrics_runtime``).
    ``tracing``: OpenTelemetry spans for this client and the workers built from it
    (``True``: the global tracer provider; or a tracer provider; see ``durable_agents.tracing``).
    """
    from durable_agents.plugin import DurableAgentsPlugin

    return await _connect(
        address,
        namespace,
        profile=profile,
        codec=codec,
        runtime=runtime,
        tracing=tracing,
        plugins=[DurableAgentsPlugin()],
    )


async def _connect(
    address: str | None,
    namespace: str | None,
    *,
    profile: str | None = None,
    codec: PayloadCodec | None = None,
    runtime: Runtime | None = None,
    tracing: bool | TracerProvider = False,
    plugins: list[SimplePlugin],
) -> Client:
    """``connect()`` with these plugins: none for a client that builds no worker (the CLI's
    commands: Temporal's worker is not imported then)."""
    if codec is None:
        from durable_agents.encryption import encryption_from_env

        codec = encryption_from_env()
    config: dict[str, Any] = dict(ClientConfig.load_client_connect_config(profile=profile))
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    config.setdefault("target_host", "localhost:7233")
    try:
        if tracing:
            from durable_agents.tracing import interceptors_for

            config["interceptors"] = [*config.get("interceptors", ()), *interceptors_for(tracing)]
        return await Client.connect(**config, data_converter=data_converter(codec), plugins=plugins, runtime=runtime)
    except RuntimeError as e:
        reason = "connection refused" if "refused" in str(e).lower() else str(e)
        raise ConfigurationError(
            f"cannot reach Temporal at {config['target_host']} ({reason}); start one with "
            "`durable-agents server`, or point TEMPORAL_ADDRESS at yours"
        ) from e
