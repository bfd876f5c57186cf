"""The wheel's layout, which pyproject.toml cannot state alone (the metadata is in pyproject.toml).

The repository keeps docs/design.md §1's top-level folders ``workflows/``, ``activities/``
and ``checkpoint/``; they install under one import namespace, as ``durable_agents.workflows``,
``durable_agents.activities`` and ``durable_agents.checkpoint``, so nothing named
``activities``/``workflows``/``checkpoint`` collides with a Temporal application's own
modules. Every package is found, not listed (a listed one was once left out of the wheel):
``find_namespace_packages`` under each root, the mapped roots prefixed with ``durable_agents.``.
Folders of data files (``contract/schemas``, ``web/static``) are packages without an
``__init__.py``, found the same way, and their files are declared below.
"""

from setuptools import find_namespace_packages, setup

MAPPED = ("workflows", "activities", "checkpoint")
"""The repository's top-level folders installed as ``durable_agents.<folder>``."""
NOT_PACKAGES = ["*__pycache__*", "*.egg-info*"]


def packages() -> list[str]:
    found = find_namespace_packages(include=["durable_agents", "durable_agents.*"], exclude=NOT_PACKAGES)
    for folder in MAPPED:
        found.append(f"durable_agents.{folder}")
        found += [f"durable_agents.{folder}.{p}" for p in find_namespace_packages(folder, exclude=NOT_PACKAGES)]
    return sorted(found)


setup(
    packages=packages(),
    package_dir={f"durable_agents.{folder}": folder for folder in MAPPED},
    package_data={
        # the wire contract ships with the code: its reference page and JSON Schema files
        "durable_agents.contract": ["wire-contract.md"],
        "durable_agents.contract.schemas": ["*.schema.json"],
        # the web inbox's page, script and style (`durable-agents web`), served by the same process
        "durable_agents.web.static": ["*"],
        # PEP 561: the package's annotations are for its users' type checkers too
        "durable_agents": ["py.typed"],
    },
    include_package_data=False,
)
