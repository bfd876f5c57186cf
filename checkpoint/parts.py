"""Content parts: what a message carries besides plain text (format version 2).

A message's ``parts`` (when present) are its content, in order; its ``content``
is then the concatenated text of its text parts, so readers that only know
text keep working. Four kinds, told apart by ``type``:

- ``text``: plain text.
- ``image``: base64 ``data`` with its ``mediaType``, or a ``url``.
- ``document``: a PDF (base64 ``data`` or a ``url``) or plain ``text``, with an optional ``title``.
- ``opaque``: a provider's own block, kept verbatim in ``data`` and sent back only to
  the ``provider`` it came from (``anthropic``: ``thinking`` with its ``signature``,
  ``redacted_thinking`` with its ``data``). Other providers never see it.

Build input parts with the constructors::

    Message.user("What is on this invoice?", DocumentPart.from_path("invoice.pdf"))
    Message.user("And in this picture?", ImagePart.from_path("receipt.png"))
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""What both providers accept as image data."""
PDF = "application/pdf"
PLAIN_TEXT = "text/plain"


class _PartModel(BaseModel):
    # The same conventions as the rest of the format (camelCase on the wire).
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class TextPart(_PartModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_PartModel):
    """An image, inline (base64 ``data`` + ``media_type``) or by ``url``."""

    type: Literal["image"] = "image"
    media_type: str | None = None
    data: str | None = None
    url: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.data is None) == (self.url is None):
            raise ValueError("an image part has exactly one of `data` (base64) and `url`")
        if self.data is not None and self.media_type not in IMAGE_MEDIA_TYPES:
            raise ValueError(f"image media type {self.media_type!r} is not one of {', '.join(IMAGE_MEDIA_TYPES)}")
        return self

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str) -> ImagePart:
        return cls(media_type=media_type, data=base64.b64encode(data).decode("ascii"))

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> ImagePart:
        """The file's bytes, inline; the media type is guessed from its name unless given."""
        path = Path(path)
        kind = media_type or mimetypes.guess_type(path.name)[0]
        if kind not in IMAGE_MEDIA_TYPES:
            raise ValueError(
                f"{path.name}: cannot tell an image type from its name (got {kind!r}); "
                f"pass media_type= (one of {', '.join(IMAGE_MEDIA_TYPES)})"
            )
        return cls.from_bytes(path.read_bytes(), kind)

    @classmethod
    def from_url(cls, url: str) -> ImagePart:
        return cls(url=url)


class DocumentPart(_PartModel):
    """A document: a PDF (base64 ``data`` or ``url``) or plain ``text``."""

    type: Literal["document"] = "document"
    media_type: str = PDF
    data: str | None = None
    text: str | None = None
    url: str | None = None
    title: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DocumentPart:
        sources = [s for s in (self.data, self.text, self.url) if s is not None]
        if len(sources) != 1:
            raise ValueError("a document part has exactly one of `data` (base64 PDF), `text` and `url`")
        if self.text is not None and self.media_type != PLAIN_TEXT:
            self.media_type = PLAIN_TEXT
        if self.data is not None and self.media_type != PDF:
            raise ValueError(f"document data must be a PDF ({PDF}), not {self.media_type!r}; send text as `text`")
        return self

    @classmethod
    def from_pdf(cls, data: bytes, title: str | None = None) -> DocumentPart:
        return cls(media_type=PDF, data=base64.b64encode(data).decode("ascii"), title=title)

    @classmethod
    def from_text(cls, text: str, title: str | None = None) -> DocumentPart:
        return cls(media_type=PLAIN_TEXT, text=text, title=title)

    @classmethod
    def from_path(cls, path: str | Path, title: str | None = None) -> DocumentPart:
        """A ``.pdf`` file inline, any other file as UTF-8 text; titled by its name unless given."""
        path = Path(path)
        if path.suffix.lower() == ".pdf":
            return cls.from_pdf(path.read_bytes(), title or path.name)
        return cls.from_text(path.read_text(encoding="utf-8"), title or path.name)

    @classmethod
    def from_url(cls, url: str, title: str | None = None) -> DocumentPart:
        return cls(media_type=PDF, url=url, title=title)


class OpaquePart(_PartModel):
    """A provider's own content block, kept byte-for-byte and sent back only to that provider."""

    type: Literal["opaque"] = "opaque"
    provider: str
    """Which API it came from: ``anthropic`` (later ``openai-responses``)."""
    data: dict[str, Any]
    """The block exactly as the API sent it."""

    @property
    def kind(self) -> str:
        """The block's own type (``thinking``, ``redacted_thinking``…)."""
        kind = self.data.get("type")
        return kind if isinstance(kind, str) else "unknown"


Part = Annotated[TextPart | ImagePart | DocumentPart | OpaquePart, Field(discriminator="type")]


def parts_text(parts: list[Any]) -> str | None:
    """The concatenated text of ``parts``' text parts (a message's ``content``), None if none."""
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    return text or None


def as_parts(items: tuple[str | Any, ...]) -> list[Any]:
    """``Message.user``'s arguments as parts: strings become text parts."""
    parts = [TextPart(text=i) if isinstance(i, str) else i for i in items]
    for part in parts:
        if not isinstance(part, TextPart | ImagePart | DocumentPart | OpaquePart):
            raise TypeError(
                f"message content must be str or a part (TextPart, ImagePart, …), not {type(part).__name__}"
            )
    return parts
