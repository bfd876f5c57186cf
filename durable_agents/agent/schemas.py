"""Tools' and outputs' JSON schemas, from their pydantic models (no Temporal import here:
the CLI's store-only commands load the definitions that use it)."""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic import BaseModel


@functools.lru_cache(maxsize=1024)
def _schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema())


def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model.model_json_schema()``, built once per model: pydantic builds it afresh at each
    call (≈ 0.2 ms for a one-field model, in every run's ``begin_run`` for every tool). Each
    call returns a dict of its own (a caller may change it)."""
    return json.loads(_schema_text(model))
