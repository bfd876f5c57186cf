"""durable-agents as a user installs it: built into an sdist, a wheel built from that sdist,
the wheel installed (not editable) into a fresh virtual environment.

The checkout's own venv has an editable install, which imports the repository's folders
and so cannot see what a wheel leaves out (a wheel once shipped without
``durable_agents/replay/``). ``build_installed()`` makes the environment that the tests of
what a user runs (``tests/test_wheel.py``, the demo, the docs' snippets) run from.

Only durable-agents comes from the wheel. Its dependencies are those of the checkout's venv,
put on the fresh environment's path by a ``.pth`` file as a plain folder: Python does not
run the ``.pth`` files of a folder named that way, so the editable install's import hook is
not loaded, and the fresh environment's own ``site-packages`` comes first. So the test needs
no network and no second copy of ~100 packages, and still imports nothing from the checkout.
``Installed.check_dependencies()`` proves the wheel's declared requirements are met there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPED = ("workflows", "activities", "checkpoint")
"""The repository's top-level folders the wheel installs as ``durable_agents.<folder>``."""


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment with durable-agents installed from its wheel."""

    venv: Path
    wheel: Path
    sdist: Path
    build_log: str
    """What building the sdist and the wheel printed (setuptools' warnings among it)."""

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def cli(self) -> Path:
        return self.bin / "durable-agents"

    @property
    def site_packages(self) -> Path:
        return Path(
            subprocess.run(
                [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a process run from the install: its ``bin`` first on PATH, no
        PYTHONPATH (nothing of the checkout importable), the caller's variables on top."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env.update(extra)
        return env


def expected_modules() -> set[str]:
    """Every module the checkout has, named as the wheel installs it."""
    names: set[str] = set()

    def add(folder: Path, package: str) -> None:
        for path in folder.rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names.add(".".join([package, *parts]))

    add(ROOT / "durable_agents", "durable_agents")
    for folder in MAPPED:
        add(ROOT / folder, f"durable_agents.{folder}")
    return names


def expected_data_files() -> set[str]:
    """The data files the package reads at run time, as paths inside ``durable_agents/``."""
    files = {"contract/wire-contract.md", "py.typed"}
    files |= {f"contract/schemas/{p.name}" for p in (ROOT / "durable_agents/contract/schemas").glob("*.schema.json")}
    files |= {f"web/static/{p.name}" for p in (ROOT / "durable_agents/web/static").iterdir() if p.is_file()}
    return files


def _run(argv: list[str], **kwargs) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def build_installed(where: Path) -> Installed:
    """Build the sdist, the wheel from it, and install the wheel into ``where/venv``."""
    dist = where / "dist"
    # `python -m build` builds the sdist, then the wheel from the unpacked sdist, as an
    # installer does from PyPI: a file missing from the sdist is missing from the wheel too.
    # No isolation: the build backend (setuptools, from the test extra) is the venv's.
    log = _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(ROOT)], cwd=where)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    installed = Installed(venv=venv, wheel=wheel, sdist=sdist, build_log=log)
    _run(
        [sys.executable, "-m", "pip", "--python", str(installed.python), "install", "--no-deps", "--quiet", str(wheel)]
    )
    deps = sysconfig.get_paths()["purelib"]
    (installed.site_packages / "_durable_agents_test_dependencies.pth").write_text(deps + "\n")
    return installed
