"""The agent every outside-client test drives: the model asks for ``charge_card``
(which needs a human's approval) with ``{"amount_cents": 4200, "recipient": "ACME Ltd"}``,
then answers "Charged 42.00 to ACME Ltd." once the tool ran."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool

AGENT_NAME = "outside-payer"
AMOUNT_CENTS = 4200
RECIPIENT = "ACME Ltd"
FINAL_TEXT = "Charged 42.00 to ACME Ltd."

CHARGES: list[tuple[str, dict]] = []
"""(session id, arguments) of every execution of ``charge_card`` in this process."""


class ChargeCard(BaseModel):
    amount_cents: int
    recipient: str


@tool(needs_approval=True)
async def charge_card(args: ChargeCard, ctx: ToolContext) -> dict:
    """Charge the customer's card (a human approves it first)."""
    CHARGES.append((ctx.session_id, args.model_dump()))
    return {"charged_cents": args.amount_cents, "recipient": args.recipient, "receipt": f"r-{len(CHARGES)}"}


register_script(
    "outside-charge",
    [
        ScriptedTurn(
            text="Charging the card.",
            tool_calls=[
                ScriptedToolCall(name="charge_card", arguments={"amount_cents": AMOUNT_CENTS, "recipient": RECIPIENT})
            ],
        ),
        ScriptedTurn(text=FINAL_TEXT),
    ],
)

payer = Agent(
    name=AGENT_NAME,
    model="scripted:outside-charge",
    instructions="You charge cards when asked.",
    tools=[charge_card],
)


def charges_of(session_id: str) -> list[dict]:
    return [args for sid, args in CHARGES if sid == session_id]
