"""``python -m durable_agents.cli``: the same as the ``durable-agents`` command."""

from durable_agents.cli import entry

entry()
