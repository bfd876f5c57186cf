"""The base of every durable contract: the checkpoint format and everything that crosses
Temporal (workflow, activity, signal, update and query inputs and outputs).

One casing rule for all of it: camelCase JSON, snake_case Python. Input in snake_case is
accepted too (``populate_by_name``), so histories recorded before the wire went camelCase
keep replaying and clients written against them keep working.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class FormatModel(BaseModel):
    """Base of every durable contract: camelCase on the wire and in the store, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, exclude_none=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
