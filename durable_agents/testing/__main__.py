"""``python -m durable_agents.testing worker …``: a crash-test worker process."""

from durable_agents.testing._worker import main

main()
