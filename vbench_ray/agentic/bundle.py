"""AgenticVBench task bundles and submission folders (format documented in docs/agentic_bundle.md).

A task bundle is one folder per task (paper §2.3-2.7, App. A.1 Table 2; PhiloLabs/agentic-vbench 4ed7ffc: the
official tasks are Harbor folders with ``task.toml``, ``environment/brief.md`` and ``instruction.md``)::

    TASK_ID/
      task.json         public metadata: task_id, family, subtype, deliverables, delivery spec
      instruction.md    the brief the agent gets
      inputs/           what the agent gets: clips/, storyboard.json, broken.mp4, source.mp4 ...
      truth/            hidden ground truth, never shown to an agent:
        truth.json      golden order / golden clip per slot / corruption window, ranges, references
        golden.mp4      Repair: the clean reference
        rubric.json     Repurpose: rubric items with signed weights

A submission folder holds the deliverables the paper names (App. A.1 Table 2): ``solution.json``,
``solution.mp4`` (Assembly, Sequencing), ``fixed.mp4`` + ``report.md`` (Repair), ``final.mp4`` +
``report.md`` (Repurpose). A folder of submissions is ``SUBMISSIONS/TASK_ID/REP/`` (one folder per
repetition), or ``SUBMISSIONS/TASK_ID/`` holding the deliverables directly (a single repetition).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vbench_ray.safepaths import safe_id

FAMILIES = ("assembly", "sequencing", "repair", "repurpose")
BUNDLE_VERSION = 1
TASK_JSON = "task.json"
INSTRUCTION = "instruction.md"
INPUTS = "inputs"
TRUTH = "truth"
TRUTH_JSON = "truth.json"
RUBRIC_JSON = "rubric.json"

# Deliverables per family (App. A.1 Table 2). Repair timeline defects also read ``solution.json``
# (the reported ranges: the paper says the agent "reports a list of time ranges" without naming a file).
DELIVERABLES: dict[str, tuple[str, ...]] = {
    "assembly": ("solution.json", "solution.mp4"),
    "sequencing": ("solution.json", "solution.mp4"),
    "repair": ("fixed.mp4", "report.md"),
    "repurpose": ("final.mp4", "report.md"),
}
# The file whose absence makes a rollout "missing" rather than merely incomplete.
PRIMARY_DELIVERABLE = {
    "assembly": "solution.json",
    "sequencing": "solution.json",
    "repair": "fixed.mp4",
    "repurpose": "final.mp4",
}
ALL_DELIVERABLES = ("solution.json", "solution.mp4", "fixed.mp4", "final.mp4", "report.md")


class BundleError(ValueError):
    """A task bundle that cannot be used. The message names the file and field."""


@dataclass
class TaskBundle:
    root: Path
    meta: dict
    truth: dict = field(default_factory=dict)
    rubric: dict | None = None
    public: bool = False  # True: the hidden truth was not loaded (what an agent may see)

    @property
    def task_id(self) -> str:
        return str(self.meta["task_id"])

    @property
    def family(self) -> str:
        return str(self.meta["family"])

    @property
    def subtype(self) -> str | None:
        return self.meta.get("subtype")

    @property
    def spec(self) -> dict:
        return dict(self.meta.get("spec") or {})

    @property
    def instruction(self) -> str:
        path = self.root / INSTRUCTION
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def input(self, relative: str) -> Path:
        """A path under ``inputs/`` (refusing paths that escape it)."""
        return _under(self.root / INPUTS, relative, f"{self.root.name}/{INPUTS}")

    def truth_file(self, relative: str) -> Path:
        if self.public:
            raise BundleError(f"task {self.task_id}: the hidden truth is not available to agents")
        return _under(self.root / TRUTH, relative, f"{self.root.name}/{TRUTH}")

    def public_view(self) -> "TaskBundle":
        """The same task without its hidden truth (what a baseline agent gets)."""
        return replace(self, truth={}, rubric=None, public=True)


def _under(root: Path, relative: str, what: str) -> Path:
    root = root.resolve()
    path = (root / str(relative)).resolve()
    if not path.is_relative_to(root):
        raise BundleError(f"{what}: path {relative!r} escapes the folder")
    return path


def read_json(path: Path, what: str) -> Any:
    if not path.exists():
        raise BundleError(f"{what} not found: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{what} {path} is not valid JSON: {exc}") from exc


def _need(obj: dict, key: str, kind, where: str):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise BundleError(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def load_task(root: str | Path, with_truth: bool = True) -> TaskBundle:
    """Read and validate one task bundle. Raises :class:`BundleError` naming the file and field."""
    root = Path(root)
    if not root.is_dir():
        raise BundleError(f"task bundle is not a directory: {root}")
    meta = read_json(root / TASK_JSON, "task.json")
    where = f"{root.name}/{TASK_JSON}"
    if not isinstance(meta, dict):
        raise BundleError(f"{where}: expected a JSON object")
    _need(meta, "task_id", str, where)
    try:  # the id names the task's submission, trajectory and sandbox folders: no separators, no `..`
        safe_id(meta["task_id"], f"{where}.task_id")
    except ValueError as exc:
        raise BundleError(str(exc)) from None
    family = _need(meta, "family", str, where)
    if family not in FAMILIES:
        raise BundleError(f"{where}.family: unknown family {family!r} (expected one of {list(FAMILIES)})")
    if not (root / INSTRUCTION).exists():
        raise BundleError(f"{root.name}: {INSTRUCTION} not found")
    task = TaskBundle(root=root, meta=meta)
    if not with_truth:
        return task.public_view()
    truth = read_json(root / TRUTH / TRUTH_JSON, f"{TRUTH}/{TRUTH_JSON}")
    if not isinstance(truth, dict):
        raise BundleError(f"{root.name}/{TRUTH}/{TRUTH_JSON}: expected a JSON object")
    task.truth = truth
    validate_truth(task)
    if family == "repurpose":
        task.rubric = read_json(task.truth_file(truth.get("rubric", RUBRIC_JSON)), f"{TRUTH}/{RUBRIC_JSON}")
        validate_rubric(task.rubric, f"{root.name}/{TRUTH}/{RUBRIC_JSON}")
    return task


def validate_truth(task: TaskBundle) -> None:
    where = f"{task.root.name}/{TRUTH}/{TRUTH_JSON}"
    t = task.truth
    if task.family == "assembly":
        slots = _need(t, "slots", list, where)
        if not slots:
            raise BundleError(f"{where}.slots: empty")
        for i, slot in enumerate(slots):
            w = f"{where}.slots[{i}]"
            _need(slot, "slot", str, w)
            cands = _need(slot, "candidates", list, w)
            golden = _need(slot, "golden", str, w)
            if golden not in cands:
                raise BundleError(f"{w}.golden: {golden!r} is not one of the slot's candidates")
    elif task.family == "sequencing":
        order = _need(t, "order", list, where)
        if len(order) < 2 or len(set(order)) != len(order) or not all(isinstance(c, str) for c in order):
            raise BundleError(f"{where}.order: expected at least 2 distinct clip names")
    elif task.family == "repair":
        group = _need(t, "group", str, where)
        if group not in ("visual", "audio", "timeline", "shot_swap"):
            raise BundleError(
                f"{where}.group: unknown defect group {group!r} (expected visual, audio, timeline or shot_swap)"
            )
        _need(t, "golden", str, where)
        _need(t, "broken", str, where)
        if group in ("visual", "audio"):
            window = _need(t, "window", list, where)
            if len(window) != 2 or not all(isinstance(x, (int, float)) for x in window) or window[0] >= window[1]:
                raise BundleError(f"{where}.window: expected [start_s, end_s] with start < end, got {window!r}")
        if group == "timeline":
            _need(t, "ranges", list, where)
            _need(t, "tolerance_s", (int, float), where)
    elif task.family == "repurpose":
        pass  # the rubric is validated on its own


RUBRIC_PILLARS = ("format", "visual", "narrative", "sound", "penalty")
FORMAT_CHECKS = ("runtime", "aspect_ratio", "container", "audio_present")


def validate_rubric(rubric: Any, where: str) -> None:
    """Repurpose rubric (§2.7): items with ``id``, ``pillar``, ``text``, signed ``weight``; Format items
    carry a programmatic ``check``."""
    items = _need(rubric, "items", list, where)
    seen: set[str] = set()
    for i, item in enumerate(items):
        w = f"{where}.items[{i}]"
        iid = _need(item, "id", str, w)
        if iid in seen or "/" in iid:
            raise BundleError(f"{w}.id: duplicate or invalid item id {iid!r}")
        seen.add(iid)
        pillar = _need(item, "pillar", str, w)
        if pillar not in RUBRIC_PILLARS:
            raise BundleError(f"{w}.pillar: unknown pillar {pillar!r} (expected one of {list(RUBRIC_PILLARS)})")
        _need(item, "text", str, w)
        weight = item.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight == 0:
            raise BundleError(f"{w}.weight: expected a non-zero number, got {weight!r}")
        if pillar == "format":
            check = _need(item, "check", dict, w)
            if check.get("type") not in FORMAT_CHECKS:
                raise BundleError(
                    f"{w}.check.type: unknown check {check.get('type')!r} (expected one of {list(FORMAT_CHECKS)})"
                )
    if not any(float(it["weight"]) > 0 for it in items):
        raise BundleError(f"{where}.items: no item has a positive weight")


def list_tasks(root: str | Path) -> list[Path]:
    """Task bundle folders under ``root`` (every sub-folder holding a ``task.json``), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise BundleError(f"tasks directory not found: {root}")
    return sorted(p for p in root.iterdir() if p.is_dir() and (p / TASK_JSON).exists())


def find_reps(submissions_root: str | Path, task_id: str) -> list[tuple[str, Path]]:
    """``(rep, folder)`` of every repetition submitted for ``task_id``, sorted by rep name.

    ``SUBMISSIONS/TASK_ID/REP/`` folders; or ``SUBMISSIONS/TASK_ID/`` itself when it holds deliverables
    directly (rep ``"0"``). A task without a folder has no repetitions.
    """
    try:  # the id alone is checked: a submissions folder may legitimately be a symlink to elsewhere
        folder = Path(submissions_root) / safe_id(task_id, "task_id")
    except ValueError:
        return []  # an id that is no folder name has no folder (load_task refuses such ids anyway)
    if not folder.is_dir():
        return []
    if any((folder / name).exists() for name in ALL_DELIVERABLES):
        return [("0", folder)]
    return sorted(
        ((p.name, p) for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda x: (len(x[0]), x[0]),
    )


# ----------------------------------------------------------------------------- writing bundles


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def write_task(root: Path, meta: dict, instruction: str, truth: dict, rubric: dict | None = None) -> Path:
    """Write ``task.json``, ``instruction.md``, ``truth/truth.json`` (and ``truth/rubric.json``)."""
    meta = {"bundle_version": BUNDLE_VERSION, **meta}
    meta.setdefault("deliverables", list(DELIVERABLES[meta["family"]]))
    write_json(root / TASK_JSON, meta)
    (root / INSTRUCTION).write_text(instruction.rstrip() + "\n", encoding="utf-8")
    if rubric is not None:
        truth = {**truth, "rubric": RUBRIC_JSON}
        write_json(root / TRUTH / RUBRIC_JSON, rubric)
    write_json(root / TRUTH / TRUTH_JSON, truth)
    return root
