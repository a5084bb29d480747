"""``command``: a model that ships only its own repository runs its official inference script per case.

``editor.command`` is a template such as ``python infer.py --video {source} --prompt={instruction}
--out {output} --num_frames {frames} --height {height} --width {width} --seed {seed}``. It is split into an
argv list with ``shlex`` *before* the placeholders are filled, and no shell runs it: an instruction full of
quotes, ``;`` or ``$(...)`` stays one argument. The instruction is task data, so the template must put it where
the script can never read it as an option (an instruction ``--output=elsewhere.mp4``): inside a word that
starts with the option's name (``--prompt={instruction}``), or after a ``--`` word (``-- {instruction}``);
a template with ``{instruction}`` as a word of its own before ``--`` (``--prompt {instruction}`` included) is
refused before any compute. ``{source}`` is the input video already resampled to the
model's frame rules (``frames``); ``{annotations}`` is the case's annotation JSON (an object: it starts with
``{``). The script runs in ``editor.workdir``, in its own process group, killed whole after
``editor.timeout_s``, with a minimal environment (``child_env``): ``PATH``, ``HOME``, the locale, the CUDA/GPU
variables Ray set for the actor and what ``editor.env`` names; never the rest of the actor's environment, where
a judge's API key may be. Its exit code, the tail of its stderr and its time are the case's record; a non-zero
exit, a timeout or a missing output is that case's ``error_edit`` and the other cases go on. Its peak GPU memory
is what ``nvidia-smi`` reports for the command's process group while it runs (gpumem.py; null without
``nvidia-smi``), never the actor's own: the model is not in the actor's process.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

from vbench_ray.editors.base import EditFailed, Editor, register_editor
from vbench_ray.editors.gpumem import GroupPeak

PLACEHOLDERS = ("source", "instruction", "annotations", "output", "frames", "height", "width", "seed")
TASK_TEXT = "instruction"  # the placeholder holding task data that may start with "-"

# What the command inherits from the actor's environment: the names, and every name with these prefixes.
# Everything else (judge API keys, cloud credentials, tokens) stays out unless editor.env names it.
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "LD_LIBRARY_PATH")
INHERITED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "NCCL_")


def build_argv(template: str, values: dict) -> list[str]:
    """``template`` split like a shell would, then each word's placeholders filled (never re-split).
    ``ValueError`` for an unknown placeholder, or an ``{instruction}`` the script could read as an option."""
    import string

    words = shlex.split(template)
    if not words:
        raise ValueError("editor.command is empty")
    parsed = [list(string.Formatter().parse(w)) for w in words]
    unknown = sorted({f for p in parsed for _, f, _, _ in p if f} - set(PLACEHOLDERS))
    if unknown:
        raise ValueError(f"editor.command: unknown placeholder(s) {unknown}; known: {list(PLACEHOLDERS)}")
    end_of_options = words.index("--") if "--" in words else len(words)
    for i, p in enumerate(parsed[:end_of_options]):
        prefix = p[0][0]  # the word's text before its first placeholder
        if any(f == TASK_TEXT for _, f, _, _ in p) and not prefix.strip("-"):
            raise ValueError(
                f"editor.command: {{{TASK_TEXT}}} in the word {words[i]!r} could be read as an option by the script "
                f"(an instruction may start with '-', e.g. --output=elsewhere.mp4): write it as the value inside "
                f"the option's own word (--prompt={{{TASK_TEXT}}}) or after a -- word (... -- {{{TASK_TEXT}}})"
            )
    return [w.format(**{k: "" if v is None else str(v) for k, v in values.items()}) for w in words]


def child_env(extra: dict | None, parent: dict | None = None) -> dict[str, str]:
    """The command's environment: from ``parent`` (the actor's), only ``INHERITED`` and ``INHERITED_PREFIXES``;
    then ``editor.env``: a value sets the variable, null passes the parent's value on (a token the model
    needs reaches it without being written into config.yaml)."""
    parent = dict(os.environ if parent is None else parent)
    env = {k: v for k, v in parent.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}
    for key, value in (extra or {}).items():
        if value is None:
            if str(key) in parent:
                env[str(key)] = parent[str(key)]
        else:
            env[str(key)] = str(value)
    return env


@register_editor
class CommandEditor(Editor):
    name = "command"
    paper = "a model's own inference script per case (CoVEBench Table 5 cost, Table 7 frame rules)"
    needs = "the model's repository and weights (editor.command, editor.workdir), GPUs: editor.num_gpus"

    @classmethod
    def check_weights(cls, cfg) -> list[str]:
        if not cfg.get("command"):
            return [
                "`editor.command` is not set: editor.name=command runs the model's inference command template "
                f"(placeholders {{{'}, {'.join(PLACEHOLDERS)}}})"
            ]
        try:
            build_argv(cfg.command, {k: "" for k in PLACEHOLDERS})
        except ValueError as exc:
            return [f"`editor.command`: {exc}"]
        workdir = cfg.get("workdir")
        if workdir and not Path(str(workdir)).expanduser().is_dir():
            return [
                f"`editor.workdir` = {str(workdir)!r} is not a folder (the model's repository, where the command runs)"
            ]
        return []

    def setup(self) -> None:
        problems = self.check_weights(self.cfg)
        if problems:  # a bad template fails at actor start
            raise ValueError("; ".join(problems))

    def edit(self, source: str, instruction: str | None, annotations: str | None, output: Path, **params) -> dict:
        argv = build_argv(
            self.cfg.command,
            {
                "source": source,
                "instruction": instruction or "",
                "annotations": annotations or "",
                "output": str(output),
                **params,
            },
        )
        env = child_env(self.cfg.get("env"))
        timeout = self.cfg.get("timeout_s")
        tail_chars = int(self.cfg.get("stderr_tail_chars") or 2000)
        proc = subprocess.Popen(
            argv,
            cwd=self.cfg.get("workdir") or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        # start_new_session: the command leads a process group of its own (pgid == its pid), polled for GPU memory
        gpu = GroupPeak(proc.pid, float(self.cfg.get("gpu_poll_s") or 0.5)).start()
        try:
            _, err = proc.communicate(timeout=float(timeout) if timeout else None)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            _, err = proc.communicate()
            peak, peak_from = gpu.stop()
            raise EditFailed(
                f"timed out after {timeout} s: {argv[0]}",
                {
                    "edit_exit_code": proc.returncode,
                    "edit_stderr": _tail(err, tail_chars),
                    "edit_peak_mb": peak,
                    "edit_peak_from": peak_from,
                },
            )
        peak, peak_from = gpu.stop()
        record = {
            "edit_exit_code": proc.returncode,
            "edit_stderr": _tail(err, tail_chars),
            "edit_peak_mb": peak,
            "edit_peak_from": peak_from,
        }
        if proc.returncode != 0:
            last = (record["edit_stderr"] or "").strip().splitlines()[-1:] or [""]
            raise EditFailed(f"exit code {proc.returncode}: {last[0][:300]}", record)
        if not output.exists() or output.stat().st_size == 0:
            raise EditFailed(f"exit code 0 but no video at {{output}} ({output})", record)
        return record


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the script and whatever it started
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _tail(data: bytes | None, n: int) -> str | None:
    if not data:
        return None
    return data[-n:].decode("utf-8", errors="replace")
