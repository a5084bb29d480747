"""A test module imports what it shares with others from ``tests/helpers``, never from another test module (which
would run that module's import in whatever folder is collected, and tie the two modules' ids together)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py") if "__pycache__" not in p.parts)


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_no_test_module_imports_another():
    tests = _modules("tests")
    test_modules = {p.stem for p in tests if p.name.startswith("test_")}
    found = {
        str(p.relative_to(ROOT)): sorted(n for n in _imported(p) if n.split(".")[0] in test_modules)
        for p in tests
        if "perf" not in p.relative_to(ROOT / "tests").parts
    }
    assert {k: v for k, v in found.items() if v} == {}, "move what they share into tests/helpers"
