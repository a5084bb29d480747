"""The repository stands alone: nothing in it points at files it does not contain.

Papers are cited by title and section, official evaluators by repository, commit and file, and the project's
own design notes live in ``docs/``. Library code says what it does and why, not which tracker item asked for it.
"""

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Names of design notes and paper folders kept outside this repository (split so this file does not match itself).
_OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            r"\b" + "DESIGN" + r"\.md\b",
            r"\b" + "ANCHORS" + r"\.md\b",
            r"\b" + "STACK" + r"\.md\b",
            r"\b" + "seeds" + r"/",
        ]
    )
)
_ISSUE = re.compile(r"\b" + "issues?" + r"\s*#?\s*\d+", re.IGNORECASE)
_SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", "mutants", "runs"}


def _repo_files() -> list:
    """Tracked files plus new ones git does not ignore; a plain walk where the tree is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
        return [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if x not in _SKIP_DIRS]
            files += [Path(d) / n for n in names]
        return files


def _text(path: Path):
    try:
        data = path.read_bytes()
    except OSError:  # listed by git but deleted in the working tree
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def _hits(pattern, files) -> list:
    hits = []
    for path in files:
        text = _text(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:160]}")
    return hits


def test_no_reference_to_files_outside_the_repo():
    files = _repo_files()
    assert any(p.name == "README.md" for p in files)
    hits = _hits(_OUTSIDE, files)
    assert not hits, "references to files outside the repository:\n" + "\n".join(hits)


def test_library_code_names_no_tracker_issue():
    files = [p for p in _repo_files() if p.suffix == ".py" and "vbench_ray" in p.relative_to(ROOT).parts[:1]]
    assert files
    hits = _hits(_ISSUE, files)
    assert not hits, "library code should say what it does and why, not cite an issue number:\n" + "\n".join(hits)


def test_patterns_catch_what_they_are_for():
    assert _OUTSIDE.search("see ../" + "shared/x") and _OUTSIDE.search("(" + "ANCHORS" + ".md §1)")
    assert _OUTSIDE.search("paper " + "seeds" + "/001") and not _OUTSIDE.search("random seeds, 42")
    assert _ISSUE.search("(" + "issue" + " 14, item 6)") and _ISSUE.search("Issue" + " 30:")
    assert not _ISSUE.search("an issue with the judge") and not _ISSUE.search("ray-project/ray#64275")


def test_maintainer_docs_exist():
    for name in ("architecture.md", "official_parity.md", "performance.md"):
        assert (ROOT / "docs" / name).is_file(), name
