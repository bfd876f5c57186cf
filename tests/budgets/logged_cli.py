"""``durable-agents`` with Python's logging at INFO, as a deployment that configures logging
runs it: ``python -m tests.budgets.logged_cli worker …``."""

from __future__ import annotations

import logging

from durable_agents.cli import entry

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    entry()
