"""The agent's tool set (OpenAI function-calling schemas) and their implementations over a :class:`Sandbox`.

- ``shell``: ``bash -c COMMAND`` in the sandbox (cwd ``/sandbox``; ``ffmpeg``, ``ffprobe`` on PATH; no network).
  Returns exit code, stdout, stderr (each truncated, head + tail). Every call is a fresh process tree: shell
  variables and ``cd`` do not persist between calls; files do.
- ``view_frames``: Frames of a video in the sandbox, attached to the conversation as images (base64
  ``data:image/jpeg`` URLs). ``times`` in seconds (negative: from the end), or ``count`` frames evenly spaced;
  ``sheet=true`` tiles them into one contact sheet.
- ``read_file``: A text file in ``/sandbox`` (``max_bytes``, default 20000).
- ``write_file``: Write text to a file in ``/sandbox`` (parents created), as the sandbox user.
- ``submit``: End the rollout. The deliverables are the files in ``/sandbox/outputs``.

Every tool answers with text (``ToolResult.text``); ``view_frames`` also returns images. A tool never
raises for bad arguments: the error text goes back to the model.
"""

from __future__ import annotations

import base64
import json
import math
import re
import shlex
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from vbench_ray.agents.sandbox import SANDBOX_MOUNT, Sandbox

TOOL_NAMES = ("shell", "view_frames", "read_file", "write_file", "submit")

TOOL_SCHEMAS: list[dict] = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": (
                "Run a bash command in your sandbox (working directory /sandbox; task inputs in "
                "/sandbox/inputs; write deliverables to /sandbox/outputs). ffmpeg and ffprobe are available. "
                "No network. Each call is a fresh shell: variables and cd do not persist, files do."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "the bash command"},
                    "timeout_s": {"type": "number", "description": "optional time limit in seconds"},
                },
                "required": ["command"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "view_frames",
            "description": (
                "Look at frames of a video file in the sandbox. Give `times` (seconds; negative counts "
                "from the end) or `count` evenly spaced frames. With sheet=true the frames are tiled into "
                "one contact sheet image. The images are attached to the conversation."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "video path, e.g. inputs/clip.mp4"},
                    "times": {"type": "array", "items": {"type": "number"}},
                    "count": {"type": "integer", "description": "frames evenly spaced over the video (default 4)"},
                    "sheet": {"type": "boolean", "description": "tile into one contact sheet (default false)"},
                    "width": {"type": "integer", "description": "width of each frame in pixels (default 320)"},
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "max_bytes": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write text to a file in the sandbox (e.g. outputs/solution.json); "
            "parent folders are created.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task. Your deliverables must already be in /sandbox/outputs.",
            "parameters": {
                "type": "object",
                "properties": {"note": {"type": "string", "description": "optional summary of what you did"}},
            },
        },
    },
]


@dataclass
class ToolResult:
    text: str
    images: list[str] = field(default_factory=list)  # data URLs
    ok: bool = True
    submit: bool = False
    info: dict = field(default_factory=dict)  # exit code, timings ... (for the trajectory)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    return f"{text[:head]}\n... [{len(text) - limit} characters cut] ...\n{text[-(limit - head) :]}"


class Tools:
    """Tool dispatch for one rollout."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        tool_timeout_s: float = 600.0,
        max_output_chars: int = 16000,
        max_images: int = 8,
        frame_width: int = 320,
        deliverables: tuple[str, ...] = (),
    ):
        self.sandbox = sandbox
        self.tool_timeout_s = float(tool_timeout_s)
        self.max_output_chars = int(max_output_chars)
        self.max_images = int(max_images)
        self.frame_width = int(frame_width)
        self.deliverables = tuple(deliverables)

    # ------------------------------------------------------------------ dispatch
    def call(self, name: str, arguments: Any, remaining_s: Optional[float] = None) -> ToolResult:
        """Run tool ``name`` with ``arguments`` (a JSON string or a dict); never raises."""
        if name not in TOOL_NAMES:
            return ToolResult(f"error: unknown tool {name!r}; available: {', '.join(TOOL_NAMES)}", ok=False)
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(f"error: the arguments of {name} are not valid JSON ({exc})", ok=False)
        if not isinstance(arguments, dict):
            return ToolResult(f"error: the arguments of {name} must be a JSON object", ok=False)
        budget = self.tool_timeout_s if remaining_s is None else max(0.5, min(self.tool_timeout_s, remaining_s))
        try:
            return getattr(self, f"_{name}")(arguments, budget)
        except (KeyError, TypeError, ValueError, OSError) as exc:
            return ToolResult(f"error: {name}: {type(exc).__name__}: {exc}", ok=False)

    # ------------------------------------------------------------------ tools
    def _shell(self, args: dict, budget: float) -> ToolResult:
        command = args["command"]
        if not isinstance(command, str) or not command.strip():
            raise ValueError("`command` must be a non-empty string")
        timeout = budget
        if args.get("timeout_s") is not None:
            timeout = max(0.5, min(budget, float(args["timeout_s"])))
        r = self.sandbox.run(command, timeout_s=timeout)
        lim = self.max_output_chars // 2
        status = f"timed out after {timeout:.0f} s (process tree killed)" if r.timed_out else f"exit code {r.exit_code}"
        sizes = (
            f" (stdout {r.stdout_bytes} bytes, stderr {r.stderr_bytes} bytes in all; head and tail shown)"
            if max(r.stdout_bytes, r.stderr_bytes) > lim
            else ""
        )
        text = f"{status}{sizes}\n--- stdout ---\n{truncate(r.stdout, lim)}\n--- stderr ---\n{truncate(r.stderr, lim)}"
        return ToolResult(
            text,
            ok=not r.timed_out and r.exit_code == 0,
            info={
                "exit_code": r.exit_code,
                "timed_out": r.timed_out,
                "wall_s": round(r.wall_s, 3),
                "stdout_bytes": r.stdout_bytes,
                "stderr_bytes": r.stderr_bytes,
            },
        )

    def _duration(self, rel: str, budget: float) -> tuple[float, float]:
        r = self.sandbox.run(f"ffmpeg -hide_banner -i {shlex.quote(rel)}", timeout_s=min(budget, 60))
        m = re.search(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)", r.stderr)
        if not m:
            raise ValueError(f"cannot read the duration of {rel!r}: {truncate(r.stderr.strip(), 400)}")
        h, mi, s = m.groups()
        f = re.search(r"Video: .*?([0-9.]+) (?:fps|tbr)", r.stderr)
        fps = float(f.group(1)) if f and float(f.group(1)) > 0 else 25.0
        return int(h) * 3600 + int(mi) * 60 + float(s), fps

    def _view_frames(self, args: dict, budget: float) -> ToolResult:
        host = self.sandbox.resolve(str(args["path"]))
        rel = str(host.relative_to(self.sandbox.work))
        if not host.is_file():
            raise ValueError(f"{SANDBOX_MOUNT}/{rel} is not a file")
        width = int(args.get("width") or self.frame_width)
        width = max(16, min(1024, width - width % 2))
        duration, fps = self._duration(rel, budget)
        last = max(0.0, duration - 1.5 / fps)  # a seek returns the first frame at or after t: this is the last one
        times = args.get("times")
        if times:
            times = [float(t) for t in times][: self.max_images * 4]
        else:
            count = max(1, min(int(args.get("count") or 4), self.max_images * 4))
            times = [(i + 0.5) * duration / count for i in range(count)]
        times = [min(max(0.0, duration + t if t < 0 else t), last) for t in times]
        sheet = bool(args.get("sheet", False))
        if not sheet and len(times) > self.max_images:
            raise ValueError(f"at most {self.max_images} separate frames per call (use sheet=true for more)")
        tag = uuid.uuid4().hex[:8]
        out_dir = f".vbr_frames/{tag}"
        inputs = " ".join(f"-ss {t:.3f} -i {shlex.quote(rel)}" for t in times)
        chains = ";".join(
            f"[{i}:v]trim=end_frame=1,setpts=PTS-STARTPTS,scale={width}:-2,format=yuvj420p[f{i}]"
            for i in range(len(times))
        )
        if sheet:
            cols = min(len(times), 4 if len(times) <= 16 else 8)
            rows = math.ceil(len(times) / cols)
            labels = "".join(f"[f{i}]" for i in range(len(times)))
            graph = f"{chains};{labels}concat=n={len(times)}:v=1:a=0,tile={cols}x{rows}:padding=2[s]"
            outputs = f"-map '[s]' -frames:v 1 -q:v 3 {out_dir}/sheet.jpg"
            names = ["sheet.jpg"]
        else:
            graph = chains
            names = [f"f{i:02d}.jpg" for i in range(len(times))]
            outputs = " ".join(f"-map '[f{i}]' -frames:v 1 -q:v 3 {out_dir}/{n}" for i, n in enumerate(names))
        cmd = (
            f"mkdir -p {out_dir} && ffmpeg -hide_banner -loglevel error -nostdin {inputs} "
            f"-filter_complex {shlex.quote(graph)} {outputs}"
        )
        r = self.sandbox.run(cmd, timeout_s=budget)
        images = []
        try:
            if r.timed_out or r.exit_code != 0:
                raise ValueError(f"frame extraction failed: {truncate((r.stderr or r.stdout).strip(), 800)}")
            for n in names:
                data = self.sandbox.read_back(self.sandbox.work / out_dir / n, max_bytes=8 << 20)
                images.append("data:image/jpeg;base64," + base64.b64encode(data).decode())
        finally:
            self.sandbox.run(f"rm -rf {out_dir}", timeout_s=30)
        stamps = ", ".join(f"{t:.3f}" for t in times)
        what = "one contact sheet (left to right, top to bottom)" if sheet else f"{len(images)} frame(s), in order"
        return ToolResult(
            f"{SANDBOX_MOUNT}/{rel} (duration {duration:.3f} s): {what} at t = [{stamps}] s; "
            "see the attached image(s).",
            images=images,
            info={"n_images": len(images), "times": times, "sheet": sheet},
        )

    def _read_file(self, args: dict, budget: float) -> ToolResult:
        host = self.sandbox.resolve(str(args["path"]))
        limit = max(1, min(int(args.get("max_bytes") or 20000), 1 << 20))
        data, size = self.sandbox.read_head(host, limit)  # only what is shown is read into memory
        text = data.decode("utf-8", "replace")
        more = f"\n... [{size - len(data)} more bytes]" if size > len(data) else ""
        return ToolResult(text + more, info={"bytes": size})

    def _write_file(self, args: dict, budget: float) -> ToolResult:
        host = self.sandbox.resolve(str(args["path"]))
        content = args["content"]
        if not isinstance(content, str):
            content = json.dumps(content)
        rel = shlex.quote(str(host.relative_to(self.sandbox.work)))
        # as the sandbox user, inside the jail: its permissions apply (inputs/ is read-only)
        r = self.sandbox.run(
            f"mkdir -p \"$(dirname {rel})\" && cat > {rel}", timeout_s=min(budget, 60), stdin=content.encode("utf-8")
        )
        if r.timed_out or r.exit_code != 0:
            return ToolResult(f"error: cannot write {SANDBOX_MOUNT}/{rel}: {r.stderr.strip()[:500]}", ok=False)
        return ToolResult(
            f"wrote {len(content.encode('utf-8'))} bytes to {SANDBOX_MOUNT}/{host.relative_to(self.sandbox.work)}",
            info={"bytes": len(content.encode("utf-8"))},
        )

    def _submit(self, args: dict, budget: float) -> ToolResult:
        outputs = self.sandbox.work / "outputs"
        present = (
            sorted(p.name for p in outputs.iterdir() if p.is_file() and not p.is_symlink())
            if outputs.is_dir() and not outputs.is_symlink()
            else []
        )
        missing = [d for d in self.deliverables if d not in present]
        note = f"; missing deliverables: {', '.join(missing)}" if missing else ""
        return ToolResult(
            f"submitted: {', '.join(present) or 'no files'} in {SANDBOX_MOUNT}/outputs{note}",
            submit=True,
            info={"present": present, "missing": missing, "note": args.get("note")},
        )
