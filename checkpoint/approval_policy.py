"""The approval policy as data: which gated tool calls are denied, approved or sent on to
an evaluator or a person, without asking a person each time.

A policy is a validated, versioned JSON document (camelCase, unknown fields refused). Its
layers are tried in this order, and the first that decides wins
(``durable_agents.checkpoint.approval_decision.decide``):

1. ``deny`` rules: a matching rule denies the call;
2. ``allow`` rules, then ``approveAll``: a matching rule approves it;
3. grants ("approve and stop asking", ``approval_grants``): a live matching grant approves it;
4. ``auto`` mode: a criteria set covering the tool sends it to the evaluator;
5. a person, as without a policy.

A rule names tools (``"*"``: every tool), optionally agents, and argument conditions
(:class:`ArgumentCondition`: a field path, an operator from a fixed set, a JSON value;
never code or an expression to evaluate). Approving everything must be said by name:
``approveAll: true``; an allow rule on every tool without conditions is refused.
:func:`check_policy_against_tools` refuses rules naming a tool the agent lacks or an
argument its tool's JSON schema does not declare. The reference is
docs/reference/approval-policy.md. Pure data and functions: no clock, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from durable_agents.checkpoint._format_model import FormatModel
from durable_agents.checkpoint.errors import ConfigurationError

__all__ = [
    "ALL_TOOLS",
    "POLICY_FORMAT_VERSION",
    "ApprovalPolicy",
    "ArgumentCondition",
    "AutoMode",
    "ConditionOp",
    "CriteriaSet",
    "EvaluatorRef",
    "PolicyCall",
    "PolicyModel",
    "PolicyRule",
    "arguments_digest",
    "check_conditions",
    "check_policy_against_tools",
    "parse_policy",
]

POLICY_FORMAT_VERSION = 1
"""The version of the policy format this code writes (``formatVersion``); it reads this and older."""

ALL_TOOLS = "*"
"""In a rule's ``tools``: every tool (alone in the list)."""

ConditionOp = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not-in", "starts-with", "ends-with"]
"""What a condition can ask of an argument. No regular expressions: a pattern can take
exponential time on arguments the model chooses, and Python's ``re`` has no timeout."""

_ORDERING: frozenset[str] = frozenset({"<", "<=", ">", ">="})
_STRING_OPS: frozenset[str] = frozenset({"starts-with", "ends-with"})
_LIST_OPS: frozenset[str] = frozenset({"in", "not-in"})


class PolicyModel(FormatModel):
    """Base of the policy's records: camelCase JSON, unknown fields refused, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """``sha256:<hex>`` of the arguments as canonical JSON (sorted keys, no spaces, UTF-8).

    The binding of a decision to the arguments it was made on, the same digest the web
    inbox sends back with a decision (``argumentsDigest``): an approval by a grant or a
    rule holds for the arguments with this digest only, never for edited ones."""
    return "sha256:" + hashlib.sha256(_CANONICAL.encode(arguments).encode()).hexdigest()


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""``json.dumps(…, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, made once."""


class PolicyCall(PolicyModel):
    """A gated tool call as the policy sees it: whose, where, which tool, with what."""

    agent: str
    session_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The arguments the model gave (the ones a person would be shown)."""


# -- argument conditions -------------------------------------------------------------------


class ArgumentCondition(PolicyModel):
    """``<arg> <op> <value>`` on one of the call's arguments, e.g.
    ``{"arg": "amount_cents", "op": "<=", "value": 5000}``.

    ``arg`` is a dotted path into the arguments (``recipient.country``; a number indexes a
    list: ``items.0.sku``). A call without that argument never satisfies the condition, so
    an allow rule does not approve it and a deny rule does not deny it (it goes on to the
    next layers). Comparisons are JSON's: ``true`` is not ``1``; ``<``, ``<=``, ``>``,
    ``>=`` compare two numbers or two strings and are false otherwise; ``in`` and
    ``not-in`` take a list; ``starts-with`` and ``ends-with`` compare strings."""

    arg: str = Field(min_length=1, max_length=500)
    op: ConditionOp
    value: JsonValue = None

    @field_validator("arg")
    @classmethod
    def _a_path(cls, arg: str) -> str:
        if not all(arg.split(".")):
            raise ValueError(
                f"{arg!r} is not a dotted path of argument names (e.g. 'amount_cents', 'recipient.country')"
            )
        return arg

    @model_validator(mode="after")
    def _value_fits_op(self) -> ArgumentCondition:
        value, op = self.value, self.op
        if op in _LIST_OPS and not isinstance(value, list):
            raise ValueError(f"{op!r} needs a list value, e.g. {{'arg': {self.arg!r}, 'op': {op!r}, 'value': [...]}}")
        if op in _ORDERING and not (_is_number(value) or isinstance(value, str)):
            raise ValueError(f"{op!r} compares with a number or a string, not {json.dumps(value)}")
        if op in _STRING_OPS and not isinstance(value, str):
            raise ValueError(f"{op!r} needs a string value, not {json.dumps(value)}")
        return self

    @model_serializer(mode="wrap")
    def _value_always(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # ``value: null`` is a value (``!= null``): written even when None fields are left out
        data: dict[str, Any] = handler(self)
        data.setdefault("value", None)
        return data

    @property
    def path(self) -> list[str]:
        return self.arg.split(".")

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the arguments satisfy the condition (never raises, whatever they are)."""
        found, actual = _lookup(arguments, self.path)
        if not found:
            return False
        op, value = self.op, self.value
        if op == "==":
            return _equal(actual, value)
        if op == "!=":
            return not _equal(actual, value)
        if op == "in":
            return any(_equal(actual, v) for v in value)  # type: ignore[union-attr]
        if op == "not-in":
            return not any(_equal(actual, v) for v in value)  # type: ignore[union-attr]
        if op in _STRING_OPS:
            if not isinstance(actual, str):
                return False
            return actual.startswith(value) if op == "starts-with" else actual.endswith(value)  # type: ignore[arg-type]
        return _ordered(actual, op, value)

    def describe(self) -> str:
        return f"{self.arg} {self.op} {json.dumps(self.value, ensure_ascii=False)}"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lookup(arguments: Any, path: Sequence[str]) -> tuple[bool, Any]:
    current = arguments
    for segment in path:
        if isinstance(current, Mapping) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            return False, None
    return True, current


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans equal booleans only, numbers compare by value, containers deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and bool(a == b)


def _ordered(actual: Any, op: str, value: Any) -> bool:
    comparable = (_is_number(actual) and _is_number(value)) or (isinstance(actual, str) and isinstance(value, str))
    if not comparable:
        return False
    if op == "<":
        return bool(actual < value)
    if op == "<=":
        return bool(actual <= value)
    if op == ">":
        return bool(actual > value)
    return bool(actual >= value)


# -- rules, auto mode, the policy ------------------------------------------------------------


class PolicyRule(PolicyModel):
    """A deny or allow rule: it matches a call of one of ``tools`` (``["*"]``: any tool), by
    one of ``agents`` (absent: any agent), whose arguments satisfy every ``when`` condition."""

    name: str = Field(min_length=1, max_length=200)
    """Cited by every decision the rule makes; unique in its policy."""
    tools: list[str] = Field(min_length=1)
    agents: list[str] | None = Field(default=None, min_length=1)
    when: list[ArgumentCondition] = Field(default_factory=list)
    note: str | None = None
    """Why the rule exists, for the people who read the policy and its decisions."""

    @field_validator("tools")
    @classmethod
    def _star_alone(cls, tools: list[str]) -> list[str]:
        if ALL_TOOLS in tools and len(tools) > 1:
            raise ValueError(f"'{ALL_TOOLS}' means every tool: it stands alone in 'tools'")
        if not all(tools):
            raise ValueError("a tool name is empty")
        return tools

    @property
    def all_tools(self) -> bool:
        return self.tools == [ALL_TOOLS]

    def matches(self, call: PolicyCall) -> bool:
        return (
            (self.all_tools or call.tool in self.tools)
            and (self.agents is None or call.agent in self.agents)
            and all(condition.holds(call.arguments) for condition in self.when)
        )


class EvaluatorRef(PolicyModel):
    """The auto mode's judge: plain Python (``python: "package.module:function"``) or a model
    through the project's providers (``model: "anthropic:claude-sonnet-4-5"``, ``"scripted:…"``)."""

    python: str | None = None
    model: str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EvaluatorRef:
        if (self.python is None) == (self.model is None):
            raise ValueError("an evaluator is either 'python' (\"package.module:function\") or 'model', one of them")
        if self.python is not None:
            module, _, attr = self.python.partition(":")
            if not module or not attr:
                raise ValueError(f"python evaluator {self.python!r} is not 'package.module:function'")
        if self.model is not None and ":" not in self.model:
            raise ValueError(f"model evaluator {self.model!r} is not '<provider>:<model>' (e.g. 'scripted:judge')")
        return self


class CriteriaSet(PolicyModel):
    """What the evaluator judges a tool's calls by: what the tool does, when to approve,
    deny or escalate, and how sure it must be. A gated call of a tool no set covers goes
    to a person."""

    name: str = Field(min_length=1, max_length=200)
    tools: list[str] = Field(min_length=1)
    """The tools it covers, by name (no ``"*"``: criteria are written for what a tool does)."""
    agents: list[str] | None = Field(default=None, min_length=1)
    purpose: str = ""
    """What the tool does, in words the evaluator is given."""
    approve_when: list[str] = Field(default_factory=list)
    deny_when: list[str] = Field(default_factory=list)
    escalate_when: list[str] = Field(default_factory=list)
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    """Overrides the auto mode's ``minConfidence`` for these tools."""

    @model_validator(mode="after")
    def _says_something(self) -> CriteriaSet:
        if ALL_TOOLS in self.tools:
            raise ValueError(f"criteria set {self.name!r}: name its tools ('{ALL_TOOLS}' is for rules only)")
        if not (self.approve_when or self.deny_when or self.escalate_when):
            raise ValueError(f"criteria set {self.name!r} has no approveWhen, denyWhen or escalateWhen")
        return self

    def covers(self, call: PolicyCall) -> bool:
        return call.tool in self.tools and (self.agents is None or call.agent in self.agents)


class AutoMode(PolicyModel):
    """Auto mode's configuration: which evaluator judges, by which criteria. The evaluator
    approves, denies or escalates; below ``minConfidence``, on an error or after
    ``timeoutSeconds`` the call goes to a person (it never fails open)."""

    evaluator: EvaluatorRef
    criteria: list[CriteriaSet] = Field(min_length=1)
    min_confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    timeout_seconds: float = Field(default=60.0, gt=0)

    def criteria_for(self, call: PolicyCall) -> CriteriaSet | None:
        """The first criteria set covering the call's tool and agent, if any."""
        return next((c for c in self.criteria if c.covers(call)), None)


class ApprovalPolicy(PolicyModel):
    """Which gated calls are decided without a person, and how (layer order: module docstring)."""

    format_version: int = POLICY_FORMAT_VERSION
    version: int = Field(default=1, ge=1)
    """Bumped on each change (:meth:`revised`); every decision names the version it was made under."""
    description: str | None = None
    deny: list[PolicyRule] = Field(default_factory=list)
    allow: list[PolicyRule] = Field(default_factory=list)
    approve_all: bool = False
    """Approve every gated call no deny rule denies: the only way to say "approve everything"."""
    auto: AutoMode | None = None

    @field_validator("format_version")
    @classmethod
    def _known_format(cls, version: int) -> int:
        if not 1 <= version <= POLICY_FORMAT_VERSION:
            raise ValueError(
                f"formatVersion {version} is not one this durable-agents reads (1 to {POLICY_FORMAT_VERSION}): "
                "it was written by a newer release, or is wrong"
            )
        return version

    @model_validator(mode="after")
    def _safe_by_construction(self) -> ApprovalPolicy:
        names = [rule.name for rule in (*self.deny, *self.allow)]
        if self.auto is not None:
            names += [criteria.name for criteria in self.auto.criteria]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"rule and criteria names must be unique (decisions cite them): {', '.join(repeated)}")
        for rule in self.allow:
            if rule.all_tools and not rule.when:
                raise ValueError(
                    f"allow rule {rule.name!r} approves every call of every tool: name its tools or give it "
                    "conditions, or say it with 'approveAll': true"
                )
        return self

    def revised(self, **changes: Any) -> ApprovalPolicy:
        """This policy with ``changes`` (Python field names) and the next version, validated anew."""
        data = {**self.model_dump(), **changes, "version": self.version + 1}
        return ApprovalPolicy.model_validate(data)


def parse_policy(data: str | bytes | Mapping[str, Any]) -> ApprovalPolicy:
    """A policy from its JSON text or a decoded document; :class:`ConfigurationError` naming
    every field that is wrong (its JSON path) when it is not a valid policy."""
    try:
        if isinstance(data, str | bytes):
            return ApprovalPolicy.model_validate_json(data)
        return ApprovalPolicy.model_validate(data)
    except ValidationError as e:
        problems = [
            f"{'.'.join(str(p) for p in error['loc']) or '(the policy)'}: {error['msg']}" for error in e.errors()
        ]
        raise ConfigurationError("invalid approval policy: " + "; ".join(problems)) from None


# -- checked against the agent's tools -------------------------------------------------------


def check_policy_against_tools(
    policy: ApprovalPolicy, tool_schemas: Mapping[str, Mapping[str, Any]], *, agent: str | None = None
) -> None:
    """Refuse a policy that names a tool the agent lacks, or an argument its tool's input
    JSON schema does not declare (or a value of a type it does not take), with a
    :class:`ConfigurationError` listing every problem.

    ``tool_schemas``: the agent's tools, name → input JSON schema (what the model is given).
    ``agent``: check only the rules and criteria that apply to this agent (a policy shared by
    several agents names some in its rules); None: all of them."""
    problems: list[str] = []
    for layer, rules in (("deny", policy.deny), ("allow", policy.allow)):
        for rule in rules:
            if agent is not None and rule.agents is not None and agent not in rule.agents:
                continue
            problems += _rule_problems(f"{layer} rule {rule.name!r}", rule, tool_schemas)
    for criteria in policy.auto.criteria if policy.auto is not None else []:
        if agent is not None and criteria.agents is not None and agent not in criteria.agents:
            continue
        problems += [
            f"criteria set {criteria.name!r}: the agent has no tool {tool!r}{_known(tool_schemas)}"
            for tool in criteria.tools
            if tool not in tool_schemas
        ]
    if problems:
        raise ConfigurationError("approval policy does not fit the agent's tools: " + "; ".join(problems))


def _rule_problems(label: str, rule: PolicyRule, tool_schemas: Mapping[str, Mapping[str, Any]]) -> list[str]:
    if rule.all_tools:
        problems = []
        for condition in rule.when:
            if not any(not check_conditions(name, [condition], schema) for name, schema in tool_schemas.items()):
                problems.append(f"{label}: no tool takes {condition.describe()}")
        return problems
    problems = []
    for tool in rule.tools:
        if tool not in tool_schemas:
            problems.append(f"{label}: the agent has no tool {tool!r}{_known(tool_schemas)}")
        else:
            problems += [f"{label}: {problem}" for problem in check_conditions(tool, rule.when, tool_schemas[tool])]
    return problems


def _known(tool_schemas: Mapping[str, Any]) -> str:
    return f" (its tools: {', '.join(sorted(tool_schemas))})" if tool_schemas else " (it has no tools)"


def check_conditions(tool: str, conditions: Iterable[ArgumentCondition], schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``conditions`` on ``tool``'s arguments, by its input JSON schema:
    an argument it does not declare, or a value the argument never takes (of another type,
    outside its ``enum``). Empty when nothing is. ``$ref``s into the schema's ``$defs`` and
    ``anyOf`` / ``oneOf`` / ``allOf`` branches are followed."""
    problems = []
    for condition in conditions:
        leaf = _declared(schema, condition.path)
        if leaf is None:
            problems.append(f"{tool} has no argument {condition.arg!r} in its input schema")
            continue
        # a value the argument never takes is a mistake: ``==`` / ``in`` on it never hold, and
        # ``!=`` / ``not-in`` always do (an allow rule on ``currency != "usd"`` approves all)
        wanted = condition.value if isinstance(condition.value, list) else [condition.value]
        exact = condition.op in ("==", "!=", "in", "not-in")  # the others compare: the kind of value counts
        bad = [v for v in wanted if not _fits(leaf, v, exact=exact)]
        if bad:
            problems.append(
                f"{tool}: in {condition.describe()}, {condition.arg!r} never takes "
                + ", ".join(json.dumps(v, ensure_ascii=False) for v in bad)
                + " (by its input schema)"
            )
    return problems


def _declared(schema: Mapping[str, Any], path: Sequence[str]) -> list[Mapping[str, Any]] | None:
    """The schemas the argument at ``path`` may have, or None when the schema does not declare it."""
    current: list[Mapping[str, Any]] = [schema]
    for segment in path:
        found: list[Mapping[str, Any]] = []
        for candidate in (c for s in current for c in _branches(s, schema)):
            properties = candidate.get("properties")
            extra = candidate.get("additionalProperties")
            if isinstance(properties, Mapping) and segment in properties:
                found.append(properties[segment])
            elif segment.isdigit() and isinstance(candidate.get("items"), Mapping):
                found.append(candidate["items"])
            elif isinstance(extra, Mapping) or extra is True:  # a mapping of free keys
                found.append(extra if isinstance(extra, Mapping) else {})
            elif not _SHAPES & candidate.keys():  # says nothing of its shape (``Any``): anything
                found.append({})
        if not found:
            return None
        current = found
    return [c for s in current for c in _branches(s, schema)]


def _branches(schema: Any, root: Mapping[str, Any], depth: int = 0) -> list[Mapping[str, Any]]:
    """``schema`` and what it stands for: its ``$ref`` target and its ``anyOf``/``oneOf``/``allOf`` branches."""
    if not isinstance(schema, Mapping) or depth > 32:
        return []
    found: list[Mapping[str, Any]] = [schema]
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        found += _branches(target, root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key) or []:
            found += _branches(branch, root, depth + 1)
    return found


_JSON_TYPES: dict[type, set[str]] = {
    bool: {"boolean"},
    int: {"integer", "number"},
    float: {"number"},
    str: {"string"},
    list: {"array"},
    dict: {"object"},
    type(None): {"null"},
}


def _fits(candidates: list[Mapping[str, Any]], value: Any, *, exact: bool) -> bool:
    """Whether one of the schemas may hold ``value`` (by ``type``, and when ``exact`` by
    ``enum`` and ``const`` too; else a number fits any numeric type: ``amount < 10.5``).
    A schema that says none of them (``{}``, an ``Any`` field) holds anything; a wrapper
    (``$ref``, ``anyOf`` …) is judged by its branches, which are among the candidates."""
    leaves = [c for c in candidates if {"type", "enum", "const"} & c.keys() or not _WRAPPERS & c.keys()]
    return not leaves or any(_holds(leaf, value, exact=exact) for leaf in leaves)


_WRAPPERS = frozenset({"$ref", "anyOf", "oneOf", "allOf"})
_SHAPES = _WRAPPERS | {"type", "enum", "const", "properties", "items", "additionalProperties", "patternProperties"}


def _holds(schema: Mapping[str, Any], value: Any, *, exact: bool) -> bool:
    types = schema.get("type")
    names = {types} if isinstance(types, str) else set(types or [])
    if not names and not exact:
        return True
    numeric = isinstance(value, float) and "integer" in names and (value.is_integer() or not exact)
    if names and not names & _JSON_TYPES.get(type(value), set()) and not numeric:
        return False
    if not exact:
        return True
    if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
        return False
    return "const" not in schema or _equal(value, schema["const"])
