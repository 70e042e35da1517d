"""Regenerate src/bindloop/__init__.py from the core modules' ``__all__`` (run after adding a name).

    python scripts/gen_root_init.py
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "bindloop"
# Order matters only for readability; a module imports only those above it (DESIGN.md §4).
MODULES = ["errors", "contracts", "clock", "signal", "completion", "transcript", "tools", "plugins",
           "skills", "routing", "run", "compaction", "loop", "session", "wire", "agent"]
HEADER = '''"""bindloop: the runtime-agnostic core of a production LLM agent loop.

The root re-exports the public API of every core module (not ``bindloop.testing`` and not
``bindloop.hosts``). Importing it only defines things: no I/O, no environment reads, no work.
"""

from __future__ import annotations
'''


def exported(module: str) -> list[str] | None:
    path = SRC / module / "__init__.py"
    if not path.exists():
        path = SRC / f"{module}.py"
    if not path.exists():
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            assert isinstance(node.value, ast.Tuple)
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    raise SystemExit(f"{path} has no __all__")


def main() -> None:
    import sys

    only = set(sys.argv[1:])  # optional: restrict to these modules (while others are in progress)
    lines = [HEADER]
    seen: dict[str, str] = {}
    for module in MODULES:
        names = exported(module)
        if names is None or (only and module not in only):
            continue
        fresh = [n for n in names if n not in seen]
        for n in fresh:
            seen[n] = module
        if not fresh:
            continue
        lines.append(f"from .{module} import (")
        lines.extend(f"    {n} as {n}," for n in fresh)
        lines.append(")")
    lines.append("")
    lines.append('__version__ = "0.1.0"')
    lines.append("")
    lines.append("__all__ = (")
    lines.extend(f'    "{n}",' for n in sorted(seen))
    lines.append(")")
    (SRC / "__init__.py").write_text("\n".join(lines) + "\n")
    print(f"{len(seen)} names from {len({*seen.values()})} modules")


if __name__ == "__main__":
    main()
