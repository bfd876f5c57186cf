"""The data converter every durable-agents client and worker uses: Temporal's pydantic
converter, a clear error for an encrypted payload no codec decrypted, and failure messages
encoded whenever payloads are (a payload codec, e.g. encryption), except the one that says
a payload's key is missing here (it names key ids only, and must be readable where it matters).

Apart from ``durable_agents.plugin`` so that a client that builds no worker (the CLI's
commands) connects without importing Temporal's worker.
"""

from __future__ import annotations

import dataclasses

from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    EncodingPayloadConverter,
    PayloadCodec,
    PayloadConverter,
)
from temporalio.exceptions import ApplicationError

from durable_agents.checkpoint.errors import ConfigurationError, FailureType
from durable_agents.encryption import EncryptedHistoryUnreadable, EncryptedPayloadRefused, PayloadKeyError


class DurableAgentsPayloadConverter(PydanticPayloadConverter):
    """The pydantic payload converter, plus a clear error for an encrypted payload
    that no codec decrypted (``encryption.EncryptedPayloadRefused``).

    Temporal's worker makes a data converter, so one of these, for every workflow
    activation; all of them share one set of encoding converters (stateless but for the
    pydantic converter's cache of type adapters, which is thread-safe and worth sharing),
    built once, instead of building the set anew each time."""

    _shared: tuple[EncodingPayloadConverter, ...] = ()

    def __init__(self) -> None:  # runs inside the workflow sandbox too: no imports here
        shared = type(self)._shared
        if not shared:
            super().__init__()
            shared = (*self.converters.values(), EncryptedPayloadRefused())
            type(self)._shared = shared
        self._set_converters(*shared)


def _payload_key_error(exception: BaseException) -> PayloadKeyError | EncryptedHistoryUnreadable | None:
    """The undecryptable-payload error ``exception`` is, or wraps as its cause (temporalio wraps
    a workflow's payload errors: ``RuntimeError("Failed decoding arguments")``)."""
    cause: BaseException | None = exception
    for _ in range(8):
        if cause is None:
            return None
        if isinstance(cause, (PayloadKeyError, EncryptedHistoryUnreadable)):
            return cause
        cause = cause.__cause__
    return None


REFUSALS = frozenset({FailureType.APPROVAL_NOT_PENDING, FailureType.INVALID_DECISION, FailureType.INVALID_RUN_INPUT})
"""Failures that refuse what a client sent (a decision, a start): their message says it all, and
a client (the Temporal UI among them) is shown no stack trace of the worker's Python files."""


class DurableAgentsFailureConverter(DefaultFailureConverter):
    """Temporal's failure converter, but a payload this process cannot decrypt (a key
    missing, another key under its id) is said plainly at the top of the failure, typed
    ``EncryptionKeyError`` and never encoded: the workflow task
    failure in history and the UI, the worker's log line and the error a querying client
    gets all name the key id (instead of ``Failed decoding arguments`` or ``Encoded failure``,
    sealed by a worker whose key is the wrong one)."""

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        key_error = _payload_key_error(exception)
        if key_error is None:
            if isinstance(exception, ApplicationError) and exception.type in REFUSALS:
                exception = exception.with_traceback(None)  # said to a client: no worker's file paths
            super().to_failure(exception, payload_converter, failure)
            return
        said = ApplicationError(str(key_error), type="EncryptionKeyError").with_traceback(key_error.__traceback__)
        DefaultFailureConverter().to_failure(said, payload_converter, failure)


OUR_DATA_CONVERTER = dataclasses.replace(
    pydantic_data_converter,
    payload_converter_class=DurableAgentsPayloadConverter,
    failure_converter_class=DurableAgentsFailureConverter,
)


class EncodedFailureConverter(DurableAgentsFailureConverter):
    """Failures with their message and stack trace inside an encoded payload.

    Used whenever a payload codec is set: a failure's message often quotes
    model output, tool arguments or a provider's reply, which the codec must
    protect like any other payload. (A payload's missing key is said plainly:
    ``DurableAgentsFailureConverter``.)
    """

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)


def with_our_converter(existing: DataConverter | None, codec: PayloadCodec | None = None) -> DataConverter:
    """The pydantic data converter, keeping everything else the user set (codec,
    failure converter); with a codec, failure messages are encoded too.

    ``codec`` is set as the payload codec; a converter with another codec already is refused."""
    base = existing if existing is not None else DataConverter.default
    if codec is not None and base.payload_codec is not codec:
        if base.payload_codec is not None:
            raise ConfigurationError(
                f"this client's data converter already has a payload codec ({type(base.payload_codec).__name__}); "
                f"pass codec={type(codec).__name__}(…) or keep that one, not both"
            )
        base = dataclasses.replace(base, payload_codec=codec)
    failures = base.failure_converter_class
    if failures in (DefaultFailureConverter, DurableAgentsFailureConverter):
        failures = DurableAgentsFailureConverter if base.payload_codec is None else EncodedFailureConverter
    if issubclass(base.payload_converter_class, PydanticPayloadConverter) and failures is base.failure_converter_class:
        return base
    if base.payload_codec is None and base is DataConverter.default:
        return OUR_DATA_CONVERTER
    return dataclasses.replace(
        base, payload_converter_class=DurableAgentsPayloadConverter, failure_converter_class=failures
    )


def carries_our_payloads(converter: DataConverter) -> bool:
    return issubclass(converter.payload_converter_class, PydanticPayloadConverter)
