"""The AES-256-GCM payload codec and its keys: formats, rotation, clear errors (no server)."""

from __future__ import annotations

import base64

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from durable_agents import ConfigurationError, DurableAgentsPlugin
from durable_agents.checkpoint.encryption import KEY_FILE_ENV, KEYS_ENV, EncryptionKeys, load_keys, new_key
from durable_agents.converter import EncodedFailureConverter, with_our_converter
from durable_agents.encryption import ENCODING, KEY_ID_METADATA, EncryptionCodec, EncryptionKeyError

K1, K2 = new_key("k1"), new_key("k2")


def _json(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


async def _roundtrip(codec: EncryptionCodec, payload: Payload) -> Payload:
    [back] = await codec.decode(await codec.encode([payload]))
    return back


async def test_a_payload_is_encrypted_with_its_key_id_in_the_metadata():
    codec = EncryptionCodec(K1)
    [encoded] = await codec.encode([_json("Book a table for Marguerite")])
    assert encoded.metadata["encoding"] == ENCODING
    assert encoded.metadata[KEY_ID_METADATA] == b"k1"
    assert b"Marguerite" not in encoded.SerializeToString()
    [again] = await codec.encode([_json("Book a table for Marguerite")])
    assert again.data != encoded.data  # a fresh nonce each time
    assert await _roundtrip(codec, _json("Book a table for Marguerite")) == _json("Book a table for Marguerite")


async def test_rotation_decrypts_with_any_key_and_encrypts_with_the_newest():
    [old] = await EncryptionCodec(K1).encode([_json("written with k1")])
    rotated = EncryptionCodec(f"{K1},{K2}")  # newest last
    [new] = await rotated.encode([_json("written with k2")])
    assert new.metadata[KEY_ID_METADATA] == b"k2"
    assert await rotated.decode([old, new]) == [_json("written with k1"), _json("written with k2")]
    # the old key retired: what it encrypted no longer reads, and the error names it
    with pytest.raises(EncryptionKeyError, match=r"key id 'k1', which is not among the keys .*\(k2\)") as lost:
        await EncryptionCodec(K2).decode([old])
    assert lost.value.key_id == "k1"


async def test_other_key_material_under_the_same_id_names_the_key():
    [encoded] = await EncryptionCodec(K1).encode([_json("x")])
    with pytest.raises(EncryptionKeyError, match="encrypted with key id 'k1' does not decrypt with the key of that id"):
        await EncryptionCodec(new_key("k1")).decode([encoded])


async def test_an_encrypted_payload_without_a_key_id_is_refused_clearly():
    [encoded] = await EncryptionCodec(K1).encode([_json("x")])
    del encoded.metadata[KEY_ID_METADATA]
    with pytest.raises(EncryptionKeyError, match="names no key id"):
        await EncryptionCodec(K1).decode([encoded])


async def test_payloads_written_before_encryption_pass_through():
    assert await EncryptionCodec(K1).decode([_json("plain")]) == [_json("plain")]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("k1", "entry 1 is not ID:BASE64"),
        ("k1:", "entry 1 is not ID:BASE64"),
        ("k1:%%%notbase64", "key 'k1' is not valid base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "key 'k1' is 5 bytes; AES-256 needs 32"),
        ("bad id:" + base64.b64encode(bytes(32)).decode(), "key id 'bad id' is not valid"),
        (f"{K1},{K1}", "key id 'k1' appears twice"),
        ("  ,  ", "no encryption key"),
    ],
    ids=["no-colon", "no-material", "not-base64", "short", "bad-id", "twice", "blank"],
)
def test_malformed_key_material_says_the_expected_format(text, needle):
    with pytest.raises(ConfigurationError, match=needle) as refused:
        EncryptionKeys.parse(text)
    message = str(refused.value)
    assert "ID:BASE64" in message and "durable-agents new-key" in message
    material = text.partition(":")[2].partition(",")[0]
    assert len(material) < 8 or material not in message  # never echoes key material


def test_keys_come_from_a_file_or_the_environment(tmp_path):
    key_file = tmp_path / "keys"
    key_file.write_text(f"# rotated 2026-01\n{K1}\n{K2}  # newest\n")
    assert load_keys(environ={}) is None
    assert load_keys(environ={KEYS_ENV: f"{K1},{K2}"}).ids == ["k1", "k2"]
    assert load_keys(environ={KEY_FILE_ENV: str(key_file)}).ids == ["k1", "k2"]
    assert load_keys(key_file, environ={KEYS_ENV: K1}).ids == ["k1", "k2"]  # the flag wins
    with pytest.raises(ConfigurationError, match="both DURABLE_AGENTS_ENCRYPTION_KEY_FILE and"):
        load_keys(environ={KEY_FILE_ENV: str(key_file), KEYS_ENV: K1})
    with pytest.raises(ConfigurationError, match=r"cannot read the encryption key file .*missing"):
        load_keys(tmp_path / "missing")
    with pytest.raises(ConfigurationError, match=f"no encryption keys are configured: set {KEYS_ENV}"):
        EncryptionCodec.from_env(environ={})
    assert "k1" in repr(EncryptionCodec(K1)) and K1.split(":")[1] not in repr(EncryptionCodec(K1).keys)


def test_the_plugin_sets_the_codec_and_encodes_failures():
    codec = EncryptionCodec(K1)
    converter = with_our_converter(None, codec)
    assert converter.payload_codec is codec and converter.failure_converter_class is EncodedFailureConverter
    with pytest.raises(ConfigurationError, match="already has a payload codec"):
        with_our_converter(converter, EncryptionCodec(K2))
    assert DurableAgentsPlugin(codec=codec).data_converter(pydantic_data_converter).payload_codec is codec


async def test_a_plain_temporalio_client_gets_encryption_with_one_argument(env):
    codec = EncryptionCodec(K1)
    client = Client(env.client.service_client, plugins=[DurableAgentsPlugin(codec=codec)])
    assert client.data_converter.payload_codec is codec


async def test_a_payload_without_its_key_is_said_plainly_in_failures_other_failures_stay_encoded():
    """A worker holding the wrong key would seal its own explanation with that key: the failure
    that says a payload's key is missing names key ids only, and stays readable (typed
    EncryptionKeyError), also when temporalio wraps it (``Failed decoding arguments``)."""
    from temporalio.api.failure.v1 import Failure

    from durable_agents.converter import OUR_DATA_CONVERTER, DurableAgentsFailureConverter
    from durable_agents.encryption import EncryptedHistoryUnreadable

    [sealed] = await EncryptionCodec(K1).encode([_json("Book a table for Marguerite")])
    with pytest.raises(EncryptionKeyError) as missing:
        await EncryptionCodec(K2).decode([sealed])
    payloads = OUR_DATA_CONVERTER.payload_converter
    assert OUR_DATA_CONVERTER.failure_converter_class is DurableAgentsFailureConverter
    for converter in (EncodedFailureConverter(), DurableAgentsFailureConverter()):
        for error in (missing.value, EncryptedHistoryUnreadable("k1")):
            try:
                raise RuntimeError("Failed decoding arguments") from error
            except RuntimeError as wrapped:
                for raised in (error, wrapped):
                    failure = Failure()
                    converter.to_failure(raised, payloads, failure)
                    assert failure.message == str(error) and "'k1'" in failure.message
                    assert failure.application_failure_info.type == "EncryptionKeyError"
                    assert not failure.application_failure_info.non_retryable
                    assert not failure.HasField("encoded_attributes")
    failure = Failure()
    EncodedFailureConverter().to_failure(ValueError("Marguerite's card was declined"), payloads, failure)
    assert failure.message == "Encoded failure" and b"Marguerite" in failure.encoded_attributes.data
