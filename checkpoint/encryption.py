"""Encryption keys by id, for Temporal payloads and for the store at rest.

No Temporal here (the checkpoint package never imports it): the payload codec
(``durable_agents.encryption``) and the encrypted store
(``checkpoint.stores.encrypted``) both use these keys.

Key material is written ``ID:BASE64``: a key id (letters, digits, ``.``, ``_``,
``-``; at most 64 characters) and 32 random bytes in base64 (standard or
URL-safe alphabet). Several keys are separated by commas or newlines,
**newest last**: the newest encrypts, every key decrypts. To rotate, append a
new key and keep the old ones for as long as anything encrypted with them is
read (Temporal history within its retention, stored sessions). Where the keys
come from:

- ``DURABLE_AGENTS_ENCRYPTION_KEYS="k1:…,k2:…"``, or
- a key file: ``--encryption-key-file PATH`` or ``DURABLE_AGENTS_ENCRYPTION_KEY_FILE``
  (one key a line, ``#`` comments; keep it owner-only).

``new_key()`` (``durable-agents new-key``) makes a key line.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from durable_agents.checkpoint.errors import ConfigurationError

__all__ = [
    "KEYS_ENV",
    "KEY_FILE_ENV",
    "EncryptionKeyError",
    "EncryptionKeys",
    "load_keys",
    "new_key",
]

KEYS_ENV = "DURABLE_AGENTS_ENCRYPTION_KEYS"
KEY_FILE_ENV = "DURABLE_AGENTS_ENCRYPTION_KEY_FILE"
KEY_BYTES = 32
NONCE_BYTES = 12
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
FORMAT_HINT = (
    "write each key as ID:BASE64 (an id of letters, digits, '.', '_' or '-', and 32 random bytes in base64), "
    "several separated by commas or newlines, newest last; `durable-agents new-key` prints one"
)


class EncryptionKeyError(ConfigurationError):
    """Data encrypted with a key this process does not have, or with other key material.

    ``key_id`` names the key (None when the data names none).
    """

    code = "ENCRYPTION_KEY_ERROR"

    def __init__(self, message: str, *, key_id: str | None = None) -> None:
        super().__init__(message)
        self.key_id = key_id


def new_key(key_id: str | None = None) -> str:
    """A fresh key line ``ID:BASE64`` (an id from the date when none is given)."""
    from datetime import UTC, datetime

    key_id = key_id or datetime.now(UTC).strftime("k%Y%m%d%H%M%S")
    _check_id(key_id, "new_key")
    return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"


def _check_id(key_id: str, source: str) -> None:
    if not _KEY_ID.match(key_id):
        raise ConfigurationError(f"{source}: key id {key_id!r} is not valid: {FORMAT_HINT}")


def _decode_material(text: str) -> bytes | None:
    """Base64 in the standard or the URL-safe alphabet, padding optional; None if neither."""
    padded = (text + "=" * (-len(text) % 4)).encode("ascii", errors="replace")
    for altchars in (None, b"-_"):
        try:
            return base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
    return None


@dataclass(frozen=True)
class EncryptionKeys:
    """Keys by id, newest last; ``source`` says where they came from (for error messages)."""

    keys: tuple[tuple[str, bytes], ...]
    source: str = "the configured keys"

    def __post_init__(self) -> None:
        if not self.keys:
            raise ConfigurationError(f"{self.source}: no encryption key; {FORMAT_HINT}")
        seen: set[str] = set()
        for key_id, material in self.keys:
            _check_id(key_id, self.source)
            if key_id in seen:
                raise ConfigurationError(
                    f"{self.source}: key id {key_id!r} appears twice (each id names one key); {FORMAT_HINT}"
                )
            seen.add(key_id)
            if len(material) != KEY_BYTES:
                raise ConfigurationError(
                    f"{self.source}: key {key_id!r} is {len(material)} bytes; AES-256 needs {KEY_BYTES} "
                    f"random bytes ({FORMAT_HINT})"
                )

    # -- reading key material ----------------------------------------------------------
    @classmethod
    def parse(cls, text: str, source: str = KEYS_ENV) -> EncryptionKeys:
        """Keys from ``ID:BASE64`` entries (commas or newlines between them, ``#`` comments)."""
        keys = []
        entries = [e.strip() for line in text.splitlines() for e in line.split("#", 1)[0].split(",")]
        for number, entry in enumerate((e for e in entries if e), start=1):
            key_id, sep, material = entry.partition(":")
            key_id, material = key_id.strip(), material.strip()
            if not sep or not key_id or not material:
                raise ConfigurationError(f"{source}: entry {number} is not ID:BASE64; {FORMAT_HINT}")
            raw = _decode_material(material)
            if raw is None:
                raise ConfigurationError(f"{source}: key {key_id!r} is not valid base64; {FORMAT_HINT}")
            keys.append((key_id, raw))
        return cls(tuple(keys), source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> EncryptionKeys:
        where = Path(path).expanduser()
        try:
            text = where.read_text()
        except OSError as e:
            raise ConfigurationError(
                f"cannot read the encryption key file {where} ({e.strerror or e}); {FORMAT_HINT}"
            ) from None
        return cls.parse(text, f"key file {where}")

    @classmethod
    def of(cls, keys: Mapping[str, bytes | str], source: str = "the keys given") -> EncryptionKeys:
        """From ``{id: key}`` (bytes or base64 text), in the mapping's order: newest last."""
        pairs = []
        for key_id, material in keys.items():
            raw = _decode_material(material) if isinstance(material, str) else material
            if raw is None:
                raise ConfigurationError(f"{source}: key {key_id!r} is not valid base64; {FORMAT_HINT}")
            pairs.append((key_id, raw))
        return cls(tuple(pairs), source)

    # -- use ------------------------------------------------------------------------------
    @property
    def ids(self) -> list[str]:
        return [key_id for key_id, _ in self.keys]

    @property
    def newest(self) -> tuple[str, bytes]:
        return self.keys[-1]

    def __iter__(self) -> Iterator[tuple[str, bytes]]:
        return iter(self.keys)

    def __repr__(self) -> str:  # never the key material
        return f"EncryptionKeys(ids={self.ids!r}, source={self.source!r})"

    def key(self, key_id: str | None, what: str = "data") -> bytes:
        """The key named ``key_id``; a clear error when there is none."""
        if key_id is None:
            raise EncryptionKeyError(
                f"encrypted {what} names no key id: it was not written by durable-agents' encryption, or was altered"
            )
        for known, material in self.keys:
            if known == key_id:
                return material
        raise EncryptionKeyError(
            f"{what} is encrypted with key id {key_id!r}, which is not among the keys of {self.source} "
            f"({', '.join(self.ids)}): add key {key_id!r} back (a key can be retired only once nothing "
            "encrypted with it is read any more)",
            key_id=key_id,
        )

    def wrong_key(self, key_id: str, what: str = "data") -> EncryptionKeyError:
        return EncryptionKeyError(
            f"{what} encrypted with key id {key_id!r} does not decrypt with the key of that id in {self.source}: "
            f"the key material differs from the one it was written with (or the data was altered)",
            key_id=key_id,
        )

    # -- AES-256-GCM: random nonce, for Temporal payloads ------------------------------------
    def seal(self, plaintext: bytes) -> tuple[str, bytes]:
        """(key id, nonce + ciphertext) with the newest key; the key id is bound as associated data."""
        key_id, material = self.newest
        nonce = os.urandom(NONCE_BYTES)
        return key_id, nonce + AESGCM(material).encrypt(nonce, plaintext, key_id.encode())

    def open(self, key_id: str | None, sealed: bytes, what: str = "a payload") -> bytes:
        material = self.key(key_id, what)
        assert key_id is not None
        try:
            return AESGCM(material).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], key_id.encode())
        except (InvalidTag, ValueError):
            raise self.wrong_key(key_id, what) from None

    # -- AES-SIV: deterministic, for the store ---------------------------------------------------
    # The stores compare what they hold with what is written again (a retried write
    # must change nothing), so the same plaintext must seal to the same bytes.
    # Deterministic encryption shows which stored values are equal, nothing more.
    def seal_deterministic(self, plaintext: bytes) -> tuple[str, bytes]:
        key_id, material = self.newest
        return key_id, AESSIV(_siv_key(material)).encrypt(plaintext, [key_id.encode()])

    def open_deterministic(self, key_id: str | None, sealed: bytes, what: str = "stored data") -> bytes:
        material = self.key(key_id, what)
        assert key_id is not None
        try:
            return AESSIV(_siv_key(material)).decrypt(sealed, [key_id.encode()])
        except (InvalidTag, ValueError):
            raise self.wrong_key(key_id, what) from None


@functools.lru_cache(maxsize=64)
def _siv_key(material: bytes) -> bytes:
    """AES-256-SIV's 64-byte key, derived from the 32-byte key (never the same bytes as GCM's)."""
    return HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=b"durable-agents store at rest").derive(material)


def load_keys(
    key_file: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> EncryptionKeys | None:
    """The configured keys, or None when encryption is not configured.

    ``key_file`` first, then ``DURABLE_AGENTS_ENCRYPTION_KEY_FILE``, then
    ``DURABLE_AGENTS_ENCRYPTION_KEYS``; setting both variables is refused (which one would win?).
    """
    env = os.environ if environ is None else environ
    if key_file:
        return EncryptionKeys.from_file(key_file)
    from_file, inline = env.get(KEY_FILE_ENV, "").strip(), env.get(KEYS_ENV, "").strip()
    if from_file and inline:
        raise ConfigurationError(f"both {KEY_FILE_ENV} and {KEYS_ENV} are set: keep one of them")
    if from_file:
        return EncryptionKeys.from_file(from_file)
    if inline:
        return EncryptionKeys.parse(inline, KEYS_ENV)
    return None
