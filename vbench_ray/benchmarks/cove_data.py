"""CoVEBench's data in the official layout: the checklist read a task at a time and checked, each task's source
and edited video found, and the exclusions of each metric (paper App. F.3-F.4).

Official layout and conventions of NJU-LINK/CoVEBench 4fe1c2f (``src/covebench_eval/``, ``common.py``
``task_id_from_path``); the config keys are described in ``vbench_ray.benchmarks.cove``.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import zlib
from collections import deque
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

from vbench_ray.benchmarks.base import DataError
from vbench_ray.benchmarks.json_array import NotAnArray, iter_json_array
from vbench_ray.editors.base import edited_name
from vbench_ray.safepaths import HASH_MARK

VIDEO_EXTS = (".mp4", ".mov", ".webm", ".mkv", ".avi")
# Official edited-video naming, tried in this order (NJU-LINK/CoVEBench 4fe1c2f, src/covebench_eval/common.py
# `task_id_from_path`).
EDITED_NAME_PATTERNS = [re.compile(p) for p in (r"task_(\d+)_output", r"output_id(\d+)", r"video[_-](\d+)", r"^(\d+)$")]
# rows whose edited videos are probed together (probe_edited's thread pool) as the loader streams them
PROBE_CHUNK = 256


# ----------------------------------------------------------------------------- checklist validation


def validate_task(task: Any, where: str) -> list[str]:
    """Problems with one checklist task, each naming the field (``task[3].evaluation_groups[0]...``)."""
    if not isinstance(task, dict):
        return [f"{where}: expected an object, got {type(task).__name__}"]
    errors = []
    tid = task.get("id")
    if isinstance(tid, bool) or not isinstance(tid, (int, str)) or not str(tid).strip():
        errors.append(f"{where}.id: expected an integer id, got {tid!r}")
    for key in ("editing_instruction", "videoA_path"):
        if not isinstance(task.get(key), str) or not task.get(key):
            errors.append(f"{where}.{key}: expected a non-empty string, got {task.get(key)!r}")
    groups = task.get("evaluation_groups", [])
    if not isinstance(groups, list):
        return errors + [f"{where}.evaluation_groups: expected a list, got {type(groups).__name__}"]
    seen: set = set()
    for g, group in enumerate(groups):
        gw = f"{where}.evaluation_groups[{g}]"
        questions = group.get("questions") if isinstance(group, dict) else None
        if not isinstance(questions, list):
            errors.append(f"{gw}.questions: expected a list")
            continue
        for q, question in enumerate(questions):
            errors += _validate_question(question, f"{gw}.questions[{q}]", seen)
    if not isinstance(task.get("category", []), list):
        errors.append(f"{where}.category: expected a list of {{'Level 1', 'Level 2', 'Level 3'}} objects")
    return errors


def _validate_question(question: Any, where: str, seen: set) -> list[str]:
    if not isinstance(question, dict):
        return [f"{where}: expected an object, got {type(question).__name__}"]
    errors = []
    qid = question.get("id")
    if not isinstance(qid, str) or not qid:
        errors.append(f"{where}.id: expected a question id like 'Q1', got {qid!r}")
    elif qid in seen:
        errors.append(f"{where}.id: duplicate question id {qid!r}")
    seen.add(qid)
    # an unknown type, an unknown dimension or a gold answer under another key is no load error: the official
    # code skips the type, routes by keywords and looks the gold up through its chain (cove_checklist)
    gold = question.get("expected_answer")
    if isinstance(gold, float) and not math.isfinite(gold):
        errors.append(f"{where}.expected_answer: {gold!r} is not a valid answer (NaN/Infinity in the JSON)")
    return errors


def task_categories(task: dict) -> tuple[list[str], list[str]]:
    """Level-1 names and ``Level 1/Level 2`` names of a task, in order, without repeats."""
    level1: list[str] = []
    level12: list[str] = []
    for c in task.get("category") or []:
        if isinstance(c, dict) and c.get("Level 1"):
            l1 = str(c["Level 1"])
            l12 = f"{l1}/{c.get('Level 2')}" if c.get("Level 2") else l1
            level1 += [l1] if l1 not in level1 else []
            level12 += [l12] if l12 not in level12 else []
    return level1, level12


# ----------------------------------------------------------------------------- paths


def resolve_under(root: Path, relative: str, what: str) -> Path:
    """``root/relative``, refusing paths that escape ``root`` (absolute paths, ``..``, symlinks out)."""
    root = root.resolve()
    path = (root / relative).resolve()
    if not path.is_relative_to(root):
        raise DataError(f"{what} {relative!r} escapes the data root {root}")
    return path


def task_id_from_name(stem: str) -> str | None:
    """The task id an edited file's name stands for (official patterns, then the last number)."""
    for pattern in EDITED_NAME_PATTERNS:
        m = pattern.search(stem)
        if m:
            return str(int(m.group(1)))
    numbers = re.findall(r"\d+", stem)
    return str(int(numbers[-1])) if numbers else None


def index_edited_videos(edited_dir: Path) -> tuple[dict[str, Path], dict[str, list[Path]], dict[str, Path]]:
    """``(index, ambiguous, by_name)``: task id -> edited video by the official patterns (an exact ``{id}.ext``
    wins; other clashes are ambiguous), and every video by file name (``edited_name(id)``, what ``vbench-ray
    edit`` writes, is looked up there first). Names with ``~`` are ``edited_name``'s one-to-one forms of odd ids:
    never read as a number by the patterns (their hash digits would name another task)."""
    if not edited_dir.is_dir():
        raise DataError(f"data.edited_dir is not a directory: {edited_dir}")
    found: dict[str, list[Path]] = {}
    by_name: dict[str, Path] = {}
    for path in sorted(edited_dir.iterdir()):
        if path.suffix.lower() in VIDEO_EXTS and path.is_file():
            by_name[path.name] = path
            tid = None if HASH_MARK in path.stem else task_id_from_name(path.stem)
            if tid is not None:
                found.setdefault(tid, []).append(path)
    index, ambiguous = {}, {}
    for tid, paths in found.items():
        exact = [p for p in paths if p.stem == tid]
        if len(paths) == 1 or len(exact) == 1:
            index[tid] = exact[0] if exact else paths[0]
        else:
            ambiguous[tid] = paths
    return index, ambiguous, by_name


# ----------------------------------------------------------------------------- exclusions


def exclusion_rule(name: str, excl: Any) -> tuple[set[str] | None, list[str]]:
    ids = {str(i).strip() for i in excl.ids}
    if excl.ids_file:
        path = Path(excl.ids_file)
        if not path.exists():
            raise DataError(f"metrics.exclude.{name}.ids_file not found: {path}")
        ids |= {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}
    ids = {str(int(i)) if i.isdigit() else i for i in ids}
    return (ids if ids else None), list(excl.categories)


def exclusion_reason(case_id: str, level1: list[str], level12: list[str], rule: tuple) -> str | None:
    """Why a case is left out of a metric, or None. Category names match Level 1 or ``Level 1/Level 2``."""
    ids, categories = rule
    if ids is not None:
        return "ids" if case_id in ids else None
    for cat in categories:
        if cat in level1 or cat in level12:
            return f"category:{cat}"
    return None


def task_id_of(task: Any, i: int) -> str:
    """A task's case id: its ``id`` (a number without leading zeros), else ``#i``."""
    case_id = str(task.get("id")) if isinstance(task, dict) and task.get("id") is not None else f"#{i}"
    return str(int(case_id)) if case_id.isdigit() else case_id


def scorable(case: dict) -> bool:
    """Whether a case's checklist is scored: it loaded (a missing or undecodable edited video is no load
    failure: ``error_edited``, counted under ``score.missing_output``, never silently out of the metrics)."""
    return not case.get("error_load")


def unusable_edited(case: dict) -> str | None:
    """Why a case's edited video cannot be used (None when it can): the load-time probe's ``error_edited``,
    or a decode failure of the frame stage that names the edited file (a source-video failure does not count)."""
    if case.get("error_edited"):
        return case["error_edited"]
    err, path = case.get("error_frames"), case.get("edited_path")
    return err if err and path and path in err else None


def probe_edited(rows: list[dict], frame_metrics: list[str], backend: str = "auto", threads: int = 8) -> None:
    """Set ``error_edited`` on rows whose edited video does not open and decode its first frame, for the rows
    no frame stage opens (no frame metric enabled, or every one excluded): the judge must not be sent an
    undecodable (zero-byte, corrupt, audio-only) video."""
    from concurrent.futures import ThreadPoolExecutor

    from vbench_ray.video.io import probe

    todo = [
        r
        for r in rows
        if not r.get("error_load") and r.get("edited_path") and all(r.get(f"excluded_{m}") for m in frame_metrics)
    ]

    def check(row: dict) -> None:
        try:
            probe(row["edited_path"], backend)
        except Exception as exc:  # decoders raise their own types; any failure means "not usable"
            row["error_edited"] = f"edited video cannot be decoded: {type(exc).__name__}: {exc}"

    if todo:
        with ThreadPoolExecutor(max_workers=min(threads, len(todo))) as pool:
            list(pool.map(check, todo))


def read_checklist(path: Path) -> Iterator[Any]:
    """The checklist's tasks, one at a time (``json_array``: the file is never parsed whole)."""
    if not path.exists():
        raise DataError(f"data.checklist not found: {path}")
    try:
        yield from iter_json_array(path)
    except json.JSONDecodeError as exc:
        raise DataError(f"data.checklist {path} is not valid JSON: {exc}") from exc
    except NotAnArray as exc:
        raise DataError(f"data.checklist {path}: expected a JSON list of tasks, got {exc.type_name}") from None


class ParsedRows:
    """Case rows made once (``CoveBench.check_data``'s parse of the checklist) and handed on once (``take``, the
    run's ``iter_cases``): pickled and zlib-compressed ``PROBE_CHUNK`` rows at a time, each chunk dropped as it is
    taken, so holding them costs a fraction of the parsed file (mostly each task's JSON, which compresses well)."""

    def __init__(self, rows: Iterator[dict]):
        self._chunks: deque[bytes] = deque()
        rows = iter(rows)
        while batch := list(islice(rows, PROBE_CHUNK)):
            self._chunks.append(zlib.compress(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL), 1))

    def take(self) -> Iterator[dict]:
        while self._chunks:
            yield from pickle.loads(zlib.decompress(self._chunks.popleft()))


def _edited_path(case_id: str, root: Path, index: dict[str, Path], by_name: dict[str, Path]) -> Path:
    """The case's edited video: ``edited_name(case_id)`` (what ``vbench-ray edit`` writes), else the official
    patterns' match. Like a source video (``resolve_under``), a video that is a link to a file outside
    ``data.edited_dir`` is refused: the case's ``error_load``."""
    path = by_name.get(edited_name(case_id)) or index.get(case_id)
    if path is None:
        raise DataError(
            f"edited video for task {case_id} not found in data.edited_dir "
            f"(expected {edited_name(case_id)} or an official name pattern)"
        )
    resolve_under(root, path.name, f"data.edited_dir: the edited video of task {case_id}")
    return path


def case_row(i: int, task: Any, checklist: Path, sources: "SourceIndex", edited, ambiguous: dict, rules: dict) -> dict:
    """One task's case row: its fields, categories, source and edited video (``edited``: ``(root, index, by_name)``
    of ``index_edited_videos``, None when an editor makes it) and each metric's exclusion (``rules``); a problem
    is the row's ``error_load``, or ``error_edited`` when only the edited video is missing or refused."""
    where = f"{checklist.name}: task[{i}]"
    case_id = task_id_of(task, i)
    row = {
        "benchmark": "cove",
        "case_id": case_id,
        "variant": "base",
        "categories": [],
        "categories_l2": [],
        "annotations": json.dumps(task, ensure_ascii=False) if isinstance(task, dict) else None,
    }
    errors = validate_task(task, f"{where} (id={case_id})")
    if errors:
        row["error_load"] = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        return row
    row["instruction"] = task["editing_instruction"]
    row["categories"], row["categories_l2"] = task_categories(task)
    try:
        source = sources.resolve(task["videoA_path"], f"{where}.videoA_path")
        row["source_path"] = str(source)
        if case_id in ambiguous:
            raise DataError(f"several edited videos match task {case_id}: {[p.name for p in ambiguous[case_id]]}")
        if edited is not None:  # else the editor stage makes it
            row["edited_path"] = str(_edited_path(case_id, *edited))
    except DataError as exc:
        if row.get("source_path") and (edited is not None or case_id in ambiguous):
            # the model's output is missing, misnamed or refused: an edited-video failure, scored under
            # score.missing_output like an undecodable one, not a load failure that leaves the metrics
            row["error_edited"] = str(exc)
        else:
            row["error_load"] = str(exc)
    for metric, rule in rules.items():
        row[f"excluded_{metric}"] = exclusion_reason(case_id, row["categories"], row["categories_l2"], rule)
    return row


class SourceIndex:
    """``resolve_under(source_dir, videoA_path)`` and its existence check, once per distinct path: tasks share
    source videos, and resolving (a ``realpath``) plus a ``stat`` per task was most of a 100k-task load."""

    def __init__(self, root: Path):
        self.root = root
        self._seen: dict[str, tuple[Path | None, bool]] = {}

    def resolve(self, relative: str, what: str) -> Path:
        hit = self._seen.get(relative)
        if hit is None:
            try:
                path = resolve_under(self.root, relative, what)
                hit = (path, path.exists())
            except DataError:
                hit = (None, False)
            self._seen[relative] = hit
        path, exists = hit
        if path is None:
            resolve_under(self.root, relative, what)  # raises, naming this task
        if not exists:
            raise DataError(f"{what}: source video not found: {path}")
        return path
