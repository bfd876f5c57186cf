"""``python -m durable_agents.contract [--check]``: rewrite (or check) the wire contract's
JSON Schema files from the models."""

from __future__ import annotations

import sys

from durable_agents.contract import SCHEMAS_DIR, stale_schemas, write_schemas


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_schemas()
        for name in stale:
            print(f"{SCHEMAS_DIR / name} is stale: run `python -m durable_agents.contract`", file=sys.stderr)
        return 1 if stale else 0
    for name in write_schemas():
        print(f"wrote {SCHEMAS_DIR / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
