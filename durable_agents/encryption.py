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
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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
    "EncryptedPayloadRefused",
    "EncryptionCodec",
    "EncryptionKeyError",
    "EncryptionKeys",
    "encryption_from_env",
    "new_key",
]

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"


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
        plain = self.keys.open(key_id, payload.data, "a Temporal payload")
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
    """

    @property
    def encoding(self) -> str:
        return ENCODING.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None  # never chosen to encode

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raw_id = payload.metadata.get(KEY_ID_METADATA)
        key_id = raw_id.decode(errors="replace") if raw_id is not None else None
        raise EncryptionKeyError(
            f"a Temporal payload is encrypted (key id {key_id!r}), and this worker or client has no encryption "
            f"keys: give it the keys every worker and client shares ({KEYS_ENV}, {KEY_FILE_ENV} or "
            "--encryption-key-file)",
            key_id=key_id,
        )
