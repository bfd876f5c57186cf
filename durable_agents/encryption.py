"""Encrypted Temporal payloads: an AES-256-GCM ``PayloadCodec`` with keys by id.

Turn it on with configuration, for client and worker alike::

    export DURABLE_AGENTS_ENCRYPTION_KEYS="k1:$(head -c32 /dev/urandom | base64)"
    durable-agents worker --agent myapp.agents:booker    # and every other command

``durable_agents.connect()``, ``AgentClient.connect()``, ``build_worker()`` and
the CLI read the keys (``checkpoint.encryption`` documents the format and the
rotation: newest last, every key decrypts). A plain temporalio application
passes the codec to the plugin::

    client = await Client.connect(address, plugins=[DurableAgentsPlugin(codec=EncryptionCodec.from_env())])

An encoded payload is ``binary/encrypted`` with the key id in its metadata
(``encryption-key-id``) and the serialized original payload, encrypted, as its
data (a 12-byte random nonce, then the ciphertext and tag; the key id is bound
as associated data). With a codec set, failure messages and stack traces are
encoded too (``EncodedFailureConverter``). ``durable-agents codec-server``
serves this codec to the Temporal UI and CLI.

A process that cannot decrypt a payload (no keys, the payload's key id missing, other
key material under that id) raises ``PayloadKeyError`` naming the key id; failures
carry that message unencoded (it names key ids and where keys come from, never a
payload's content), so a worker holding a wrong key still says plainly why. A workflow
worker without keys that *replays* a run's history raises ``EncryptedHistoryUnreadable``
instead: its workflow task fails, saying so, and is retried until a worker with the key
takes it; the run itself is left as it is (see ``EncryptedPayloadRefused``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import EncodingPayloadConverter, PayloadCodec

from durable_agents.checkpoint.encryption import (
    KEY_FILE_ENV,
    KEYS_ENV,
    EncryptionKeyError,
    EncryptionKeys,
    load_keys,
    new_key,
)
from durable_agents.checkpoint.errors import ConfigurationError

__all__ = [
    "ENCODING",
    "KEYS_ENV",
    "KEY_FILE_ENV",
    "KEY_ID_METADATA",
    "EncryptedHistoryUnreadable",
    "EncryptedPayloadRefused",
    "EncryptionCodec",
    "EncryptionKeyError",
    "EncryptionKeys",
    "PayloadKeyError",
    "encryption_from_env",
    "new_key",
]

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEYS_HINT = f"the keys every worker and client shares ({KEYS_ENV}, {KEY_FILE_ENV} or --encryption-key-file)"


class PayloadKeyError(EncryptionKeyError):
    """A Temporal payload this process cannot decrypt: it has no keys, not the payload's
    key id, or other key material under that id. ``key_id`` names the payload's key.

    Its message names key ids and where keys come from, never a payload's content, so a
    failure carrying it is not encoded (``converter.DurableAgentsFailureConverter``): a
    worker with a wrong key would otherwise seal its own explanation with that key."""


class EncryptedHistoryUnreadable(Exception):
    """A workflow worker without encryption keys is replaying a run whose history is encrypted.

    Deliberately not a ``DurableAgentsError`` (those fail the run): the run's history goes on
    past the point where it would fail, so failing it would be a command the history does not
    hold (Temporal's ``Nondeterminism error``), and the run is fine. Temporal fails the
    workflow task instead, with this message (``converter`` carries it unencoded, typed
    ``EncryptionKeyError``), and retries the task until a worker with the key takes it.
    """

    def __init__(self, key_id: str | None) -> None:
        super().__init__(
            f"this worker cannot decrypt the run's history: it holds Temporal payloads encrypted with key id "
            f"{key_id!r}, and this worker has no encryption keys: give it {KEYS_HINT}. The run is unchanged: "
            f"its workflow task is retried, and the run goes on on a worker with key {key_id!r}"
        )
        self.key_id = key_id


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM: encrypts with the newest key, decrypts with whichever key a payload names.

    Payloads that are not ``binary/encrypted`` pass through ``decode`` unchanged
    (history written before encryption was turned on still reads).
    """

    def __init__(self, keys: EncryptionKeys | str | Mapping[str, bytes | str]) -> None:
        if isinstance(keys, str):
            keys = EncryptionKeys.parse(keys, "EncryptionCodec(keys)")
        elif not isinstance(keys, EncryptionKeys):
            keys = EncryptionKeys.of(keys, "EncryptionCodec(keys)")
        self.keys = keys

    @classmethod
    def from_env(
        cls, key_file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
    ) -> EncryptionCodec:
        """The codec of the configured keys (see ``encryption_from_env``); an error if none are."""
        codec = encryption_from_env(key_file, environ)
        if codec is None:
            raise ConfigurationError(
                f"no encryption keys are configured: set {KEYS_ENV} (ID:BASE64, newest last) or "
                f"{KEY_FILE_ENV} to a key file; `durable-agents new-key` prints a key"
            )
        return codec

    def __repr__(self) -> str:
        return f"EncryptionCodec(key ids {', '.join(self.keys.ids)}; newest {self.keys.newest[0]})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encode_one(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decode_one(p) for p in payloads]

    def encode_one(self, payload: Payload) -> Payload:
        key_id, sealed = self.keys.seal(payload.SerializeToString())
        return Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id.encode()}, data=sealed)

    def decode_one(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        raw_id = payload.metadata.get(KEY_ID_METADATA)
        key_id = raw_id.decode(errors="replace") if raw_id is not None else None
        try:
            plain = self.keys.open(key_id, payload.data, "a Temporal payload")
        except EncryptionKeyError as e:
            raise PayloadKeyError(str(e), key_id=e.key_id) from None
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded


def encryption_from_env(
    key_file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> EncryptionCodec | None:
    """The codec of ``key_file``, ``$DURABLE_AGENTS_ENCRYPTION_KEY_FILE`` or
    ``$DURABLE_AGENTS_ENCRYPTION_KEYS``; None when none is set (no encryption)."""
    keys = load_keys(key_file, environ)
    return None if keys is None else EncryptionCodec(keys)


class EncryptedPayloadRefused(EncodingPayloadConverter):
    """An encrypted payload that reached the payload converter: no codec decrypted it.

    Part of durable-agents' payload converter, so a worker or client started
    without the keys says so instead of ``Unknown payload encoding``: a run
    whose worker has no keys fails at once with this message (a
    ``DurableAgentsError``; its checkpoint stays resumable on a worker that has them).
    A worker without keys replaying a run that another worker ran with them (a paused
    run, asked a query or sent a decision) fails only its workflow task, with
    ``EncryptedHistoryUnreadable``: the run goes on once a worker with the key takes it.
    """

    @property
    def encoding(self) -> str:
        return ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never chosen to encode

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raw_id = payload.metadata.get(KEY_ID_METADATA)
        key_id = raw_id.decode(errors="replace") if raw_id is not None else None
        if _replaying_workflow_history():
            raise EncryptedHistoryUnreadable(key_id)
        raise PayloadKeyError(
            f"a Temporal payload is encrypted (key id {key_id!r}), and this worker or client has no encryption "
            f"keys: give it {KEYS_HINT}",
            key_id=key_id,
        )


def _replaying_workflow_history() -> bool:
    """Whether this decode belongs to a workflow activation that replays recorded history.

    temporalio decodes an activation's jobs (the run's input, activity results, signals)
    before it runs the workflow's event loop, so ``workflow.unsafe.is_replaying()`` has no
    current workflow to ask there. The workflow instance doing the decoding is on this
    thread's stack (its ``activate``, which set ``is_replaying`` from the activation first);
    outside a workflow worker (a client, an activity) there is none, and the answer is no.
    Only ever called on the way to an error, so the walk costs nothing otherwise.
    """
    runtime_type = getattr(sys.modules.get("temporalio.workflow"), "_Runtime", None)
    if runtime_type is None:
        return False
    current = runtime_type.maybe_current()
    if current is not None:
        return bool(current.workflow_is_replaying())
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, runtime_type):
            return bool(candidate.workflow_is_replaying())
        frame = frame.f_back
    return False
