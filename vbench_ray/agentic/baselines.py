"""Baseline "agents" that need no LLM: they read a task's inputs and write a submission folder, so the
evaluation job scores them exactly like any agent's rollouts (``data.agent=<name>`` in the job).

* ``random``: chance behaviour, which the chance-adjusted verifiers should score about 0. Assembly: a
  uniformly random candidate per slot; Sequencing: a random permutation; Repair: cuts a random 0.5 s
  range and reports it; Repurpose: random 1 s pieces of the source, uncropped, of a random length.
* ``heuristic``: Sequencing by visual continuity (the cost of cutting clip i to clip j is the distance
  between i's last frame, extrapolated one step, and j's first frame; the order is the cheapest path,
  exact for n <= 12 clips, best-of-greedy plus relocation moves above); Repair by detecting and undoing
  the synthetic defects (a repeated segment is cut and reported; cuts that break continuity are
  re-ordered by the same continuity path; a colour shift is inverted by a per-channel affine fit at its
  boundaries; a blurred window gets back the high frequencies of its sharp neighbours, registered to it,
  where they agree with it;
  a noisy audio window is spectrally gated; echo and clipping are not handled, and anything undetected
  is passed through, which the near-copy gate scores 0); Repurpose: a
  format-aware cut (evenly spaced pieces of the source filling the brief's runtime, centre-cropped to
  its aspect ratio, audio kept). Assembly has no non-LLM heuristic here: it falls back to ``random``.
* ``oracle``: reads the hidden truth (golden picks, golden order, the golden video and ranges): an
  upper-bound check of the verifiers, not a baseline. Repurpose: the heuristic cut.

Agents other than ``oracle`` get the task's public view only (no ``truth/``). The Repair baselines are in
``agentic/baselines_repair.py``, the continuity path in ``agentic/continuity.py``.
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from vbench_ray.agentic.bundle import TaskBundle, load_task
from vbench_ray.agentic.baselines_repair import repair_heuristic, repair_oracle, repair_random
from vbench_ray.agentic.continuity import best_path, continuity_costs
from vbench_ray.agentic.media import Media, read_media, write_media
from vbench_ray.agentic.solution_files import write_report, write_solution

log = logging.getLogger(__name__)

AGENTS = ("random", "heuristic", "oracle")


def agent_rng(seed: int, agent: str, task_id: str, rep: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(f"{agent}/{task_id}/{rep}".encode())])


def _concat_clips(paths: list[Path], out: Path) -> list[float]:
    """Write the clips back to back to ``out``; their durations (frames / fps)."""
    media = [read_media(p, audio=False) for p in paths]
    write_media(out, np.concatenate([m.frames for m in media]), media[0].fps)
    return [len(m.frames) / media[0].fps for m in media]


def _clip_names(task: TaskBundle) -> list[str]:
    return sorted(p.name for p in task.input("clips").iterdir() if p.suffix == ".mp4")


# ----------------------------------------------------------------------------- assembly


def assembly_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    board = json.loads(task.input("storyboard.json").read_text())
    picks = {s["slot"]: str(rng.choice(s["candidates"])) for s in board["slots"]}
    return _assembly_write(task, out, board, picks, "random candidate per slot")


def assembly_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    board = json.loads(task.input("storyboard.json").read_text())
    picks = {s["slot"]: s["golden"] for s in task.truth["slots"]}
    return _assembly_write(task, out, board, picks, "golden candidate per slot (oracle)")


def _assembly_write(task, out: Path, board: dict, picks: dict, how: str) -> dict:
    """``solution.json`` in both shapes (the task judge's ``segments``, the ``slots`` mapping) and the
    picked clips concatenated in slot order, each segment's place in ``solution.mp4`` declared."""
    clips = [task.input(f"clips/{picks[s['slot']]}") for s in board["slots"]]
    durations = _concat_clips(clips, out / "solution.mp4")
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    segments = [
        {
            "slot": s["slot"],
            "source": picks[s["slot"]],
            "output": [float(starts[i]), float(starts[i + 1])],
            "source_range": [0.0, float(durations[i])],
        }
        for i, s in enumerate(board["slots"])
    ]
    write_solution(out / "solution.json", {"segments": segments, "slots": picks})
    return {"how": how}


# ----------------------------------------------------------------------------- sequencing


def sequencing_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    names = _clip_names(task)
    order = [names[i] for i in rng.permutation(len(names))]
    return _sequencing_write(task, out, order, "random permutation")


def sequencing_continuity(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    names = _clip_names(task)
    clips = [read_media(task.input(f"clips/{n}"), audio=False).frames for n in names]
    path = best_path(continuity_costs(clips))
    return _sequencing_write(task, out, [names[i] for i in path], "visual continuity (cheapest path)")


def sequencing_oracle(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    return _sequencing_write(task, out, list(task.truth["order"]), "ground-truth order (oracle)")


def _sequencing_write(task, out: Path, order: list[str], how: str) -> dict:
    """The clips concatenated in ``order`` and ``solution.json`` as the official harness writes it: one
    segment per slot with its place in ``solution.mp4`` (``output``) and in the clip (``source_range``)."""
    durations = _concat_clips([task.input(f"clips/{n}") for n in order], out / "solution.mp4")
    starts = np.concatenate([[0.0], np.cumsum(durations)])
    write_solution(
        out / "solution.json",
        {
            "segments": [
                {
                    "source": n,
                    "output": [float(starts[i]), float(starts[i + 1])],
                    "source_range": [0.0, float(durations[i])],
                }
                for i, n in enumerate(order)
            ]
        },
    )
    return {"how": how}


# ----------------------------------------------------------------------------- repurpose


def _parse_aspect(text: str) -> float:
    a, b = str(text).replace("/", ":").split(":")
    return float(a) / float(b)


def _crop_to(frames: np.ndarray, aspect: float) -> np.ndarray:
    h, w = frames.shape[1:3]
    if w / h > aspect:
        nw = max(2, int(round(h * aspect / 2)) * 2)
        x = (w - nw) // 2
        return frames[:, :, x : x + nw]
    nh = max(2, int(round(w / aspect / 2)) * 2)
    y = (h - nh) // 2
    return frames[:, y : y + nh]


def _pieces(src: Media, starts: list[float], piece: float) -> tuple[np.ndarray, np.ndarray | None]:
    fps, sr = src.fps, src.sample_rate
    n = int(round(piece * fps))
    frames = np.concatenate([src.frames[int(round(s * fps)) : int(round(s * fps)) + n] for s in starts])
    audio = None
    if src.audio is not None:
        m = int(round(piece * sr))
        audio = np.concatenate([src.audio[int(round(s * sr)) : int(round(s * sr)) + m] for s in starts])
    return frames, audio


def repurpose_random(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    src = read_media(task.input("source.mp4"))
    total = int(rng.integers(3, 13))
    starts = sorted(float(x) for x in rng.uniform(0, src.info.duration - 1.0, size=total))
    frames, audio = _pieces(src, [math.floor(s * src.fps) / src.fps for s in starts], 1.0)
    write_media(out / "final.mp4", frames, src.fps, audio, src.sample_rate)
    write_report(out, f"# Report\n\nRandom baseline: {total} random one-second pieces of the source.")
    return {"how": "random pieces", "seconds": total}


def repurpose_format_aware(task: TaskBundle, out: Path, rng: np.random.Generator) -> dict:
    spec = task.spec
    src = read_media(task.input("source.mp4"))
    runtime = float(spec.get("runtime_s", 6.0))
    n = max(1, int(round(runtime)))
    piece = runtime / n
    span = src.info.duration - piece
    starts = [math.floor((span * i / max(1, n - 1)) * src.fps) / src.fps for i in range(n)]
    frames, audio = _pieces(src, starts, piece)
    if spec.get("aspect_ratio"):
        frames = _crop_to(frames, _parse_aspect(spec["aspect_ratio"]))
    write_media(out / "final.mp4", frames, src.fps, audio if spec.get("audio", True) else None, src.sample_rate)
    write_report(
        out,
        f"# Report\n\nFormat-aware cut: {n} evenly spaced pieces of {piece:.2f} s, centre-cropped to "
        f"{spec.get('aspect_ratio')}, source audio kept.",
    )
    return {"how": "evenly spaced pieces, cropped to the brief's aspect ratio"}


# ----------------------------------------------------------------------------- dispatch

STRATEGIES: dict[str, dict[str, Callable]] = {
    "random": {
        "assembly": assembly_random,
        "sequencing": sequencing_random,
        "repair": repair_random,
        "repurpose": repurpose_random,
    },
    "heuristic": {
        "assembly": assembly_random,
        "sequencing": sequencing_continuity,
        "repair": repair_heuristic,
        "repurpose": repurpose_format_aware,
    },
    "oracle": {
        "assembly": assembly_oracle,
        "sequencing": sequencing_oracle,
        "repair": repair_oracle,
        "repurpose": repurpose_format_aware,
    },
}


def solve(agent: str, task_dir: str | Path, out_dir: str | Path, rep: str = "0", seed: int = 0) -> dict:
    """Run baseline ``agent`` on one task; its deliverables go to ``out_dir`` (created)."""
    if agent not in STRATEGIES:
        raise ValueError(f"unknown baseline agent {agent!r}; known: {list(STRATEGIES)}")
    task = load_task(task_dir, with_truth=(agent == "oracle"))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = STRATEGIES[agent][task.family](task, out, agent_rng(seed, agent, task.task_id, rep))
    return {"agent": agent, "task_id": task.task_id, "rep": rep, **info}


def run_baseline(agent: str, tasks_dir: str | Path, out_dir: str | Path, reps: int = 3, seed: int = 0) -> dict:
    """``agent`` on every task of ``tasks_dir``, ``reps`` times: ``out_dir/<task_id>/<rep>/`` (the
    submissions layout the job reads). Returns ``{"submissions_dir", "n_rollouts"}``."""
    from vbench_ray.agentic.bundle import list_tasks

    out = Path(out_dir)
    n = 0
    for task_dir in list_tasks(tasks_dir):
        for rep in range(reps):
            solve(agent, task_dir, out / task_dir.name / str(rep), str(rep), seed)
            n += 1
    return {"submissions_dir": str(out), "n_rollouts": n}
