"""The wire contract: what any Temporal client (the ``temporal`` CLI, the Go, TypeScript or
Java SDK, a plain ``temporalio`` client) sends to and reads from durable-agents' workflows.

The names below and the JSON Schema files in ``schemas/`` are the contract; the reference
page ``wire-contract.md`` beside this file explains it. The schemas are generated from the
models (``python -m durable_agents.contract`` rewrites them, ``--check`` compares), and a
test fails when a model changes without its schema file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from durable_agents._defaults import DEFAULT_TASK_QUEUE
from durable_agents.activities.contracts import (
    MAX_DECISION_BYTES,
    TRUNCATED,
    VIEW_BYTES,
    ApprovalDecision,
    ForkSessionInput,
    ForkSessionOutput,
    MigrateSessionInput,
    MigrateSessionOutput,
    PendingApproval,
    RunState,
)
from durable_agents.activities.policies import ClearPolicyRequest, PolicyTarget, SetPolicyRequest
from durable_agents.activities.subagent_contracts import SUBAGENT_APPROVAL_SIGNAL
from durable_agents.checkpoint.errors import FailureType
from durable_agents.checkpoint.format import Checkpoint
from durable_agents.checkpoint.policy_book import StoredPolicy
from durable_agents.workflows.budget_waits import BUDGET_WAIT_SIGNAL
from durable_agents.workflows.contracts import (
    AGENT_RUN_WORKFLOW,
    FORK_WORKFLOW,
    MAX_INLINE_INPUT_BYTES,
    AgentRunInput,
    Outcome,
    RunSummary,
)
from durable_agents.workflows.migrate import MIGRATE_WORKFLOW
from durable_agents.workflows.policies import CLEAR_POLICY_UPDATE, POLICIES_WORKFLOW, SET_POLICY_UPDATE
from durable_agents.workflows.search import SEARCH_ATTRIBUTES

SCHEMAS_DIR = Path(__file__).parent / "schemas"
PAGE = Path(__file__).parent / "wire-contract.md"

Mode = Literal["validation", "serialization"]


@dataclass(frozen=True)
class Shape:
    """One model on the wire, and which way it travels: what a client sends is validated
    (``validation``: optional fields may be left out), what it reads is serialized."""

    name: str
    model: type[BaseModel]
    mode: Mode

    @property
    def file(self) -> str:
        return f"{self.name}.schema.json"

    def schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema(by_alias=True, mode=self.mode)
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"durable-agents/{self.file}",
            **schema,
        }


SHAPES: tuple[Shape, ...] = (
    Shape("AgentRunInput", AgentRunInput, "validation"),
    Shape("RunSummary", RunSummary, "serialization"),
    Shape("ApprovalDecision", ApprovalDecision, "validation"),
    Shape("Outcome", Outcome, "serialization"),
    Shape("PendingApproval", PendingApproval, "serialization"),
    Shape("RunState", RunState, "serialization"),
    Shape("ForkSessionInput", ForkSessionInput, "validation"),
    Shape("ForkSessionOutput", ForkSessionOutput, "serialization"),
    Shape("MigrateSessionInput", MigrateSessionInput, "validation"),
    Shape("MigrateSessionOutput", MigrateSessionOutput, "serialization"),
    Shape("Checkpoint", Checkpoint, "serialization"),
    Shape("PolicyTarget", PolicyTarget, "validation"),
    Shape("SetPolicyRequest", SetPolicyRequest, "validation"),
    Shape("ClearPolicyRequest", ClearPolicyRequest, "validation"),
    Shape("StoredPolicy", StoredPolicy, "serialization"),
)
"""Every input and output of the workflows and their handlers, and the checkpoint format."""


@dataclass(frozen=True)
class Handler:
    kind: Literal["signal", "update", "query"]
    name: str
    takes: str | None
    returns: str | None
    internal: bool = False


WORKFLOWS: dict[str, tuple[str, str]] = {
    AGENT_RUN_WORKFLOW: ("AgentRunInput", "RunSummary"),
    FORK_WORKFLOW: ("ForkSessionInput", "ForkSessionOutput"),
    MIGRATE_WORKFLOW: ("MigrateSessionInput", "MigrateSessionOutput"),
    POLICIES_WORKFLOW: ("PolicyTarget", "integer"),
}
"""Workflow type → (input schema, result schema; ``integer``: a JSON number, no schema file)."""

AGENT_RUN_HANDLERS: tuple[Handler, ...] = (
    Handler("signal", "approve", "ApprovalDecision", None),
    Handler("update", "decide", "ApprovalDecision", "Outcome"),
    Handler("update", "wait_outcome", None, "Outcome"),
    Handler("query", "pending_approval", None, "PendingApproval"),
    Handler("query", "run_state", None, "RunState"),
    Handler("signal", SUBAGENT_APPROVAL_SIGNAL, None, None, internal=True),
    Handler("signal", BUDGET_WAIT_SIGNAL, None, None, internal=True),
)
"""The ``AgentRun`` workflow's signals, updates and queries (a query may also answer null)."""

POLICIES_HANDLERS: tuple[Handler, ...] = (
    Handler("update", SET_POLICY_UPDATE, "SetPolicyRequest", "StoredPolicy"),
    Handler("update", CLEAR_POLICY_UPDATE, "ClearPolicyRequest", "StoredPolicy"),
)
"""The ``ApprovalPolicies`` workflow's updates."""

ERROR_TYPES: tuple[FailureType, ...] = tuple(FailureType)
"""Every ``ApplicationError.type`` a run fails with or an update is refused with."""

__all__ = [
    "AGENT_RUN_HANDLERS",
    "DEFAULT_TASK_QUEUE",
    "ERROR_TYPES",
    "MAX_DECISION_BYTES",
    "MAX_INLINE_INPUT_BYTES",
    "PAGE",
    "POLICIES_HANDLERS",
    "SCHEMAS_DIR",
    "SEARCH_ATTRIBUTES",
    "SHAPES",
    "TRUNCATED",
    "VIEW_BYTES",
    "WORKFLOWS",
    "Handler",
    "Shape",
    "schema_text",
    "stale_schemas",
    "write_schemas",
]


def schema_text(shape: Shape) -> str:
    return json.dumps(shape.schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def stale_schemas(folder: Path = SCHEMAS_DIR) -> list[str]:
    """The schema files that differ from what the models say now (or are missing or extra)."""
    wanted = {shape.file: schema_text(shape) for shape in SHAPES}
    stale = [
        name for name, text in wanted.items() if not (folder / name).is_file() or (folder / name).read_text() != text
    ]
    extra = [p.name for p in folder.glob("*.schema.json") if p.name not in wanted]
    return sorted(stale + extra)


def write_schemas(folder: Path = SCHEMAS_DIR) -> list[str]:
    """Rewrite every schema file from the models; returns the files that changed."""
    changed = stale_schemas(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for path in folder.glob("*.schema.json"):
        if path.name not in {shape.file for shape in SHAPES}:
            path.unlink()
    for shape in SHAPES:
        (folder / shape.file).write_text(schema_text(shape))
    return changed
