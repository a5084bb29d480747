"""NRVBench's inputs: the annotations JSONL (validated record by record) and the edited videos of each method.

The format is defined in ``docs/nrv_format.md`` (the paper gives the fields, App. A); a malformed record is
that case's ``error_load``, never the run's failure. ``data.edited_dir`` holds one sub-folder per method
(or one method's videos directly), each with an optional ``timing.json`` for FPS (App. E.6).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from vbench_ray import controls as ctl
from vbench_ray.benchmarks import nrv_scoring as scoring
from vbench_ray.benchmarks.base import DataError, duplicate_ids
from vbench_ray.benchmarks.cove_data import VIDEO_EXTS, resolve_under

log = logging.getLogger(__name__)

TIMING_FILE = "timing.json"


# ----------------------------------------------------------------------------- annotations


def read_annotations(path: Path) -> list[tuple[int, Any]]:
    """``(line number, record or JSON error text)`` for every non-empty line of the annotations JSONL."""
    if not path.is_file():
        raise DataError(f"data.annotations not found: {path}")
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"data.annotations {path} is not UTF-8 text: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            out.append((n, f"not valid JSON ({exc.msg} at column {exc.colno})"))
    if not out:
        raise DataError(f"data.annotations {path} holds no records")
    return out


def _text(rec: dict, key: str, where: str, errors: list, required: bool = True) -> None:
    value = rec.get(key)
    if value is None and not required:
        return
    if not isinstance(value, str) or (required and not value.strip()):
        errors.append(f"{where}.{key}: expected a non-empty string, got {value!r}")


def validate_record(rec: Any, where: str) -> list[str]:
    """Problems with one annotation record, each naming its field (``annotations.jsonl:3.mcq.answer``)."""
    if not isinstance(rec, dict):
        return [f"{where}: expected a JSON object, got {type(rec).__name__}"]
    errors: list[str] = []
    rid = rec.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not str(rid).strip():
        errors.append(f"{where}.id: expected a non-empty id, got {rid!r}")
    elif not re.fullmatch(r"[A-Za-z0-9._-]+", str(rid)):
        errors.append(f"{where}.id: {rid!r} may only hold letters, digits, '.', '_' and '-'")
    for key in ("video", "source_prompt", "target_prompt", "instruction"):
        _text(rec, key, where, errors)
    for key in ("video_id", "mask", "negative_prompt"):
        _text(rec, key, where, errors, required=False)
    if rec.get("category") not in scoring.CATEGORIES:
        errors.append(f"{where}.category: expected one of {list(scoring.CATEGORIES)}, got {rec.get('category')!r}")
    if rec.get("difficulty") not in scoring.DIFFICULTIES:
        errors.append(
            f"{where}.difficulty: expected one of {list(scoring.DIFFICULTIES)}, got {rec.get('difficulty')!r}"
        )
    mcq = rec.get("mcq")
    if not isinstance(mcq, dict):
        errors.append(f"{where}.mcq: expected an object {{question, options, answer}}, got {mcq!r}")
    else:
        _text(mcq, "question", f"{where}.mcq", errors)
        options = mcq.get("options")
        if (
            not isinstance(options, dict)
            or len(options) < 2
            or not all(
                isinstance(k, str) and re.fullmatch(r"[A-Z]", k) and isinstance(v, str) and v.strip()
                for k, v in options.items()
            )
        ):
            errors.append(
                f"{where}.mcq.options: expected at least two options {{\"A\": text, \"B\": text, ...}} "
                f"keyed by single capital letters, got {options!r}"
            )
        else:
            if mcq.get("answer") not in options:
                errors.append(f"{where}.mcq.answer: expected one of {list(options)}, got {mcq.get('answer')!r}")
            partial = mcq.get("partial", [])
            if not isinstance(partial, list) or any(p not in options for p in partial):
                errors.append(f"{where}.mcq.partial: expected a list of option letters, got {partial!r}")
    physics = rec.get("physics", {})
    if not isinstance(physics, dict):
        errors.append(f"{where}.physics: expected an object {{criteria, question}}, got {physics!r}")
    else:
        criteria = physics.get("criteria", [])
        if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
            errors.append(f"{where}.physics.criteria: expected a list of strings, got {criteria!r}")
        _text(physics, "question", f"{where}.physics", errors, required=False)
    temporal = rec.get("temporal")
    if not isinstance(temporal, dict):
        errors.append(f"{where}.temporal: expected an object {{question}}, got {temporal!r}")
    else:
        _text(temporal, "question", f"{where}.temporal", errors)
        _text(temporal, "flicker_question", f"{where}.temporal", errors, required=False)
    return errors


def normalized_record(rec: dict) -> dict:
    """The record with its optional fields filled in (``video_id``, ``mask``, ``negative_prompt``, ``physics``)."""
    out = dict(rec)
    out["id"] = str(rec["id"])
    out["video_id"] = str(rec.get("video_id") or rec["id"])
    out["mask"] = rec.get("mask") or f"masks/{out['video_id']}"
    out.setdefault("negative_prompt", "")
    out["physics"] = {"criteria": [], **(rec.get("physics") or {})}
    out["mcq"] = {"partial": [], **rec["mcq"]}
    return out


# ----------------------------------------------------------------------------- edited videos


def discover_methods(edited_dir: Path, wanted: list[str], flat_name: str | None) -> tuple[list[tuple[str, Path]], bool]:
    """``([(method, folder)], flat)``: per-method sub-folders, or one method's videos directly (flat)."""
    if not edited_dir.is_dir():
        raise DataError(f"data.edited_dir is not a directory: {edited_dir}")
    has_videos = lambda d: any(p.suffix.lower() in VIDEO_EXTS and p.is_file() for p in d.iterdir())  # noqa: E731
    subdirs = sorted(d for d in edited_dir.iterdir() if d.is_dir() and not d.name.startswith(".") and has_videos(d))
    if subdirs:
        if has_videos(edited_dir):
            log.warning(
                "data.edited_dir %s holds method folders and loose videos; the loose videos are ignored", edited_dir
            )
        names = [d.name for d in subdirs]
        unknown = [m for m in wanted if m not in names]
        if unknown:
            raise DataError(f"data.methods: no folder for {unknown} in data.edited_dir {edited_dir} (found {names})")
        return [(d.name, d) for d in subdirs if not wanted or d.name in wanted], False
    name = flat_name or edited_dir.name
    if wanted and list(wanted) != [name]:
        raise DataError(
            f"data.methods={list(wanted)}: data.edited_dir {edited_dir} holds the videos of one method "
            f"({name!r}) directly"
        )
    return [(name, edited_dir)], True


def edited_video(folder: Path, instance_id: str, root: Path | None = None) -> Path | None:
    """``folder/{instance_id}.ext``, or None. A video that resolves outside ``root`` (``data.edited_dir``; default
    ``folder``), such as a link to a file elsewhere, raises ``DataError``: the rule of source videos under
    ``data.root`` (``resolve_under``)."""
    root = folder if root is None else root
    for ext in VIDEO_EXTS:
        p = folder / f"{instance_id}{ext}"
        if p.parent == folder and p.is_file():  # an id like ../x or /x names no file of this folder
            resolve_under(root, str(p.relative_to(root)), "data.edited_dir: the edited video")
            return p
    return None


def read_timing(folder: Path) -> dict[str, float]:
    """Per instance id, the editor's frames per second from ``timing.json`` (absent: no FPS)."""
    path = folder / TIMING_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        log.warning("ignoring %s: not valid JSON (%s)", path, exc)
        return {}
    out = {}
    for key, value in data.items() if isinstance(data, dict) else ():
        try:
            if isinstance(value, dict):
                fps = float(value["frames"]) / float(value["seconds"])
            else:
                fps = float(value)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            log.warning("%s: entry %r is not {seconds, frames} or a number; no FPS for it", path, key)
            continue
        if np.isfinite(fps) and fps > 0:
            out[str(key)] = fps
    return out


def read_instances(records, path: Path, root: Path) -> list[dict]:
    """The annotation records (``read_annotations``'s ``(line, record)`` pairs) as instances: ``id``, the
    normalised ``record``, its ``errors`` and the resolved source video and mask folder (``paths``)."""
    duplicate_ids(
        [str(rec["id"]) for _, rec in records if isinstance(rec, dict) and rec.get("id") is not None],
        "instance ids",
        f"data.annotations {path}",
    )
    out, seen = [], set()
    for n, rec in records:
        where = f"{path.name}:{n}"
        if isinstance(rec, str):
            out.append({"id": f"line{n}", "record": None, "errors": [f"{where}: {rec}"], "paths": {}})
            continue
        errors = validate_record(rec, where)
        iid = str(rec.get("id")) if isinstance(rec, dict) and rec.get("id") is not None else f"line{n}"
        if iid in seen:
            errors.append(f"{where}.id: duplicate id {iid!r} (already used by an earlier record)")
            iid = f"line{n}"
        seen.add(iid)
        paths: dict[str, str] = {}
        record = None
        if not errors:
            record = normalized_record(rec)
            try:
                video = resolve_under(root, record["video"], f"{where}.video")
                if not video.is_file():
                    raise DataError(f"{where}.video: source video not found: {video}")
                mask = resolve_under(root, record["mask"], f"{where}.mask")
                if not mask.is_dir():
                    raise DataError(f"{where}.mask: mask folder not found: {mask}")
                if not any(p.suffix.lower() in ctl.MASK_EXTS for p in mask.iterdir()):
                    raise DataError(f"{where}.mask: mask folder {mask} holds no mask images")
                paths = {"video": str(video), "mask": str(mask)}
            except DataError as exc:
                errors.append(str(exc))
        elif isinstance(rec, dict):
            record = rec  # kept as written (its category still groups the failure)
        out.append({"id": iid, "record": record, "errors": errors, "paths": paths})
    return out


def case_row(inst: dict, method: str, folder: Path, flat: bool, timing: dict, eligible: bool) -> dict:
    """The case row of one instance edited by ``method`` (its videos in ``folder``; ``flat``: case ids without the
    method); a problem is the row's ``error_load``."""
    iid, rec = inst["id"], inst["record"] or {}
    case_id = iid if flat else f"{method}:{iid}"
    category = rec.get("category") if rec.get("category") in scoring.CATEGORIES else None
    row = {
        "benchmark": "nrv",
        "case_id": case_id,
        "variant": "base",
        "method": method,
        "instance_id": iid,
        "video_id": str(rec["video_id"]) if rec.get("video_id") is not None else None,
        "category": category,
        "difficulty": rec.get("difficulty") if rec.get("difficulty") in scoring.DIFFICULTIES else None,
        "categories": [category] if category else [],
        "instruction": rec.get("instruction") if isinstance(rec.get("instruction"), str) else None,
        "source_path": inst["paths"].get("video"),
        "mask_path": inst["paths"].get("mask"),
        "edited_path": None,
        "annotations": json.dumps(rec, ensure_ascii=False) if rec else None,
        "variant_params": None,
        "FPS": timing.get(iid),
        "control_eligible": eligible,
        "error_load": None,
    }
    errors = list(inst["errors"])
    if not errors:
        try:  # flat: the folder is data.edited_dir; else one of its method folders
            video = edited_video(folder, iid, folder if flat else folder.parent)
            if video is None:
                raise DataError(f"edited video for {iid} of method {method!r} not found: expected {folder}/{iid}.mp4")
            row["edited_path"] = str(video)
        except DataError as exc:
            errors.append(str(exc))
    if errors:
        row["error_load"] = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
    return row


def control_eligible(instances: list[dict], per_category: int | None) -> set[str]:
    """Ids of the instances that get negative controls: the first ``per_category`` of each category, in the
    annotations' order (App. F.1: 5), or all of them (None)."""
    rank: dict[str, int] = {}
    eligible = set()
    for inst in instances:
        cat = inst["record"].get("category") if inst["record"] else None
        rank[cat] = rank.get(cat, 0) + 1
        if per_category is None or rank[cat] <= per_category:
            eligible.add(inst["id"])
    return eligible
