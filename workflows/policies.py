"""``ApprovalPolicies``: change an agent's or a session's approval policy from any Temporal
client, checked on a worker that knows the agent's tools.

One short workflow per target (workflow id ``activities.policies.policies_workflow_id``), started with
update-with-start: its ``set_policy`` / ``clear_policy`` update validates the request's shape
(unknown fields refused) before anything runs, then the ``change_approval_policy`` activity
checks the policy against the agent's tools and writes it to the policy book, honouring
``expectedVersion``. A refusal is the update's error (``ConfigurationError``,
``PolicyVersionConflictError``), with nothing changed. The workflow ends once its handlers
have finished.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from durable_agents.activities.policies import (
        ClearPolicyRequest,
        PolicyActivities,
        PolicyChangeInput,
        PolicyTarget,
        SetPolicyRequest,
        StoredPolicy,
    )
    from durable_agents.checkpoint.errors import FailureType
    from durable_agents.workflows import options

POLICIES_WORKFLOW = "ApprovalPolicies"
SET_POLICY_UPDATE = "set_policy"
CLEAR_POLICY_UPDATE = "clear_policy"
LINGER = timedelta(seconds=30)
"""How long a workflow started without an accepted update waits for one before it ends."""


def _refused(problem: str) -> ApplicationError:
    return ApplicationError(problem, type=FailureType.CONFIGURATION, non_retryable=True)


def _one(model: type[BaseModel], shape: str, payloads: tuple[Any, ...]) -> Any:
    if len(payloads) != 1:
        got = "no payload" if not payloads else f"{len(payloads)} payloads"
        raise _refused(f"the update takes one JSON payload like {shape}; got {got}")
    try:
        return model.model_validate(payloads[0])
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'the payload'}: {err['msg']}"
            for err in e.errors(include_url=False)[:5]
        )
        raise _refused(f"not a valid request ({problems}); expected {shape}") from None


SET_SHAPE = '{"policy": {…}, "changedBy": "alice", "expectedVersion": 3}'
CLEAR_SHAPE = '{"changedBy": "alice", "expectedVersion": 3}'


@workflow.defn(name=POLICIES_WORKFLOW, sandboxed=options.SANDBOXED)
class ApprovalPoliciesWorkflow:
    @workflow.init
    def __init__(self, raw: Any) -> None:
        try:
            self._target: PolicyTarget | None = PolicyTarget.model_validate(raw)
            self._problem: str | None = None
        except ValidationError as e:
            self._target, self._problem = None, f"not a policy target ({e.errors(include_url=False)[0]['msg']})"
        self._changes = 0

    @workflow.run
    async def run(self, raw: Any) -> int:
        """How many changes it made; ends once its updates have finished."""
        if self._target is None:
            raise _refused(f'{self._problem}: start it with {{"agent": …}} or {{"sessionId": …}}')
        try:
            await workflow.wait_condition(
                lambda: self._changes > 0 and workflow.all_handlers_finished(), timeout=LINGER
            )
        except TimeoutError:
            pass
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._changes

    @workflow.update(
        name=SET_POLICY_UPDATE,
        description="Make a policy the target's next version: "
        f"{SET_SHAPE}; checked against the agent's tools on the worker; answers the stored policy.",
    )
    async def set_policy(self, *payloads: Any) -> StoredPolicy:
        request: SetPolicyRequest = _one(SetPolicyRequest, SET_SHAPE, payloads)
        return await self._change(
            PolicyChangeInput(
                target=self._checked_target(),
                policy=request.policy,
                changed_by=request.changed_by,
                expected_version=request.expected_version,
            ),
            "set",
        )

    @set_policy.validator
    def _validate_set(self, *payloads: Any) -> None:
        self._checked_target()
        _one(SetPolicyRequest, SET_SHAPE, payloads)

    @workflow.update(
        name=CLEAR_POLICY_UPDATE,
        description=f"Remove the target's policy (the next version): {CLEAR_SHAPE}; answers the stored state.",
    )
    async def clear_policy(self, *payloads: Any) -> StoredPolicy:
        request: ClearPolicyRequest = _one(ClearPolicyRequest, CLEAR_SHAPE, payloads)
        return await self._change(
            PolicyChangeInput(
                target=self._checked_target(),
                changed_by=request.changed_by,
                expected_version=request.expected_version,
            ),
            "clear",
        )

    @clear_policy.validator
    def _validate_clear(self, *payloads: Any) -> None:
        self._checked_target()
        _one(ClearPolicyRequest, CLEAR_SHAPE, payloads)

    def _checked_target(self) -> PolicyTarget:
        if self._target is None:
            raise _refused(f'{self._problem}: start it with {{"agent": …}} or {{"sessionId": …}}')
        return self._target

    async def _change(self, inp: PolicyChangeInput, what: str) -> StoredPolicy:
        try:
            stored = await workflow.execute_activity_method(
                PolicyActivities.change_approval_policy,
                inp,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(
                    maximum_attempts=5,
                    non_retryable_error_types=[
                        FailureType.CONFIGURATION,
                        FailureType.POLICY_VERSION_CONFLICT,
                        FailureType.STORE_CORRUPT,
                    ],
                ),
                summary=f"{what} policy of {inp.target.scope}",
            )
        except ActivityError as e:
            cause = e.cause
            if isinstance(cause, ApplicationError):  # the activity's refusal, as the update's own error
                raise ApplicationError(cause.message, *cause.details, type=cause.type, non_retryable=True) from None
            raise
        self._changes += 1
        return stored
