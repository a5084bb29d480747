"""A per-rollout Linux sandbox for agent tool calls (no container runtime needed).

Every command an agent runs (``shell``, and the sandboxed steps of ``read_file``, ``write_file`` and
``view_frames``) is a fresh process tree started as::

    unshare --net --mount --pid --fork --mount-proc --kill-child=SIGKILL [--map-root-user] \\
        /bin/sh SETUP ...   # builds a private root, then:
    chroot ROOT setpriv --reuid U --regid U --clear-groups --no-new-privs --bounding-set=-all \\
        prlimit --cpu --as --nproc --fsize --nofile --core -- /bin/bash -c 'cd /sandbox && COMMAND'

What it enforces (``SandboxLimits`` holds the numbers):

* **No network.** A fresh network namespace with only a (down) loopback: nothing on the host, 127.0.0.1
  included, can be reached.
* **A private file view.** A new mount namespace whose root is a tmpfs holding read-only bind mounts of
  ``/usr`` (and the ``/bin``, ``/lib``... links or dirs), a whitelisted copy of a few ``/etc`` files, ``/dev/
  {null,zero,random,urandom}``, a fresh ``/proc`` (of the new pid namespace), a private ``/tmp`` (tmpfs),
  ``/opt/vbr/bin`` (ffmpeg, ffprobe) and the rollout's working directory at ``/sandbox`` — the only
  writable place that outlives the command. The task bundle (``truth/`` included), the repository, other
  rollouts, ``/root``, ``/home`` and the host's ``/tmp`` are not in the view at all.
* **Not root.** As root, commands run under a per-rollout unprivileged uid (``uid_base + hash(rollout)``,
  no capabilities, ``no_new_privs``), so the chroot cannot be undone and ``RLIMIT_NPROC`` is enforced
  (it is not for root). Without root, ``--map-root-user`` (an unprivileged user namespace) is used and the
  commands run as the mapped root of that namespace: still no network and a private view, but ``nproc``
  counts the invoking user's processes (documented in docs/agents.md).
* **Resource limits** (``prlimit``): CPU seconds, address space, processes, file size, open files, no core
  dumps; a wall-clock timeout per command, after which the whole process tree is killed (``SIGKILL`` to
  the process group; the pid namespace's init dying takes every process of the namespace with it).
* **A disk quota for the whole rollout.** ``fsize`` bounds one file, not the total: as root, the rollout's
  working directory is a tmpfs of its own (``size=`` the inputs plus ``disk_mb``, ``nr_inodes=`` the inputs
  plus ``disk_inodes``), mounted by :meth:`Sandbox.prepare` and unmounted by :meth:`Sandbox.cleanup`, so
  it persists across the rollout's commands and the host disk cannot be filled. tmpfs lives in memory
  (and swap): ``disk_mb`` is also a memory budget. Without root (or where the mount fails) a warning is
  logged and there is no total quota. A harness killed mid-rollout leaves its tmpfs mounted until that
  rollout is prepared again (``prepare`` unmounts leftovers it made) or it is unmounted by hand.
* **Bounded output.** A command's stdout and stderr are read as they come and only a head and a tail of
  each (``output_kb`` in all) are kept; the text says how many bytes were cut.
* **No host paths in ``/proc/self/mountinfo``** (as root). The mount table of the namespace names each
  mount's source path; ``/sandbox`` is the root of its own tmpfs (shows as ``/``), and ffmpeg is mounted
  from a neutral hard link (:func:`neutral_tool`), so neither the run directory nor the install path
  shows. Without root both still show.

The inputs of a task are hard-linked (copied when linking is impossible, as into the root-only tmpfs, or
the source is writable by others) into ``/sandbox/inputs``, owned by root and read-only to the agent; the
agent writes its deliverables to ``/sandbox/outputs``. The harness reads files back only through
:meth:`Sandbox.read_back` (and :meth:`Sandbox.copy_out`), which refuse symlinks, anything that resolves outside
the sandbox and anything that is not a regular file (a FIFO would block the reader forever), and cap the size.
The sandbox's folders are deleted only when their marker file (:data:`MARKER`, written by ``prepare``)
says this class made them.

``ffmpeg`` is the binary of the ``imageio-ffmpeg`` package; when no ``ffprobe`` is installed on the host a
small shell stand-in (:data:`FFPROBE_SHIM`) is put on the sandbox ``PATH`` as ``ffprobe``: it prints what
``ffmpeg -i`` reports, plus ``duration=``/``width=``/``height=``/``fps=`` lines, and supports
``-show_entries format=duration`` / ``-of csv=p=0`` style duration queries. It is not the real ffprobe.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

from vbench_ray.agents.sandbox_root import (
    DEVICES,
    ETC_WHITELIST,
    FFPROBE_SHIM,
    MARKER,
    ROOT_DIRS,
    SANDBOX_MOUNT,
    SETUP_SCRIPT,
    TOOLS_DIR,
    SandboxError,
    SandboxLimits,
    copy_tree,
    link_or_copy,
    page_kb,
    uid_for,
    check_support,
    ffmpeg_exe,
    host_ffprobe,
    neutral_tool,
)
from vbench_ray.agents.sandbox_output import CommandResult, CappedStream, feed_stdin, pump

# the sandbox's public names, whichever module holds them
__all__ = ["SANDBOX_MOUNT", "CommandResult", "Sandbox", "SandboxError", "SandboxLimits", "check_support"]

log = logging.getLogger(__name__)


class Sandbox:
    """One rollout's working directory and the jail its commands run in.

    ``Sandbox(root, key)``: ``root/sandbox`` is the agent's ``/sandbox`` (as root: a size-limited tmpfs);
    ``root/.mnt`` an empty mount point; ``root/.vbr-sandbox`` the marker that this class made them.
    ``prepare(inputs_dir, instruction)`` fills it; ``run(command, timeout_s)`` runs a command inside;
    ``cleanup()`` unmounts and deletes what ``prepare`` made, and nothing else.
    """

    def __init__(self, root: str | Path, key: str, limits: SandboxLimits | None = None):
        self.root = Path(root).resolve()
        self.work = self.root / "sandbox"
        self.mnt = self.root / ".mnt"
        self.marker = self.root / MARKER
        self.key = key
        self.limits = limits or SandboxLimits()
        self.as_root = os.geteuid() == 0
        self.uid = uid_for(key, self.limits) if self.as_root else os.geteuid()
        # as root /sandbox is a tmpfs too, so no host path is left in the mount table; without root the
        # sandbox folder shows anyway, and a non-root user could not hard-link (it would copy 170 MB)
        hide = neutral_tool if self.as_root else (lambda path: path)
        self._ffmpeg = hide(ffmpeg_exe())
        probe = host_ffprobe()
        self._ffprobe = hide(probe) if probe else None
        self.quota: Optional[str] = None  # the tmpfs options when /sandbox has a quota

    # ------------------------------------------------------------------ ownership
    def _ours(self) -> bool:
        return not self.root.is_symlink() and self.marker.is_file() and not self.marker.is_symlink()

    def _unmount_work(self) -> None:
        if os.path.ismount(self.work):
            r = subprocess.run(["umount", str(self.work)], capture_output=True, text=True)
            if r.returncode != 0:  # busy: detach it now, the kernel frees it when the last user goes
                subprocess.run(["umount", "-l", str(self.work)], capture_output=True, text=True)

    def _remove_work(self) -> None:
        """Delete ``work`` and ``.mnt`` (only call when the marker says we made them)."""
        self._unmount_work()
        for path in (self.work, self.mnt):
            if path.is_symlink():
                path.unlink()
            elif path.is_dir():
                if os.path.ismount(path):
                    raise SandboxError(f"{path} is still a mount point: refusing to delete through it")
                shutil.rmtree(path)

    def _mount_quota(self, input_kb: int, input_files: int) -> None:
        """Make ``work`` a tmpfs of its own: the agent may add ``disk_mb`` MiB and ``disk_inodes`` entries
        to what ``prepare`` puts there. Logs a warning and goes on without a quota where that is impossible."""
        lim = self.limits
        if not lim.disk_mb or lim.disk_mb <= 0:
            return
        if not self.as_root:
            log.warning(
                "agent sandbox %s: not root, so /sandbox gets no total disk quota (limits.disk_mb); "
                "only the per-file limit (fsize_mb) applies",
                self.root,
            )
            return
        size_kb = int(lim.disk_mb) * 1024 + input_kb + 1024
        inodes = int(lim.disk_inodes) + input_files + 16
        opts = f"size={size_kb}k,nr_inodes={inodes},mode=755,nosuid,nodev"
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "vbr-sandbox", str(self.work)], capture_output=True, text=True
        )
        if r.returncode != 0:
            log.warning(
                "agent sandbox %s: cannot mount a tmpfs for /sandbox (%s): no total disk quota",
                self.root,
                r.stderr.strip()[:300],
            )
            return
        self.quota = opts

    # ------------------------------------------------------------------ setup
    def prepare(self, inputs_dir: str | Path | None, instruction: str | None = None) -> "Sandbox":
        """Create ``/sandbox`` with ``inputs/`` (linked, read-only to the agent), ``outputs/`` and
        ``instruction.md``. Only the task's public inputs go in; never ``truth/``."""
        if self.root.is_symlink():
            raise SandboxError(f"sandbox root {self.root} is a symlink: refusing to use it")
        self.root.mkdir(parents=True, exist_ok=True)
        leftovers = [p for p in (self.work, self.mnt) if p.exists() or p.is_symlink()]
        if leftovers:
            if not self._ours():
                raise SandboxError(
                    f"{leftovers[0]} exists but was not made by a vbench-ray sandbox ({MARKER} "
                    f"missing in {self.root}): refusing to delete it"
                )
            self._remove_work()  # a crashed attempt's leftovers (its tmpfs included)
        self.marker.write_text(f"made by vbench_ray.agents.sandbox for {self.key}\n", encoding="utf-8")
        self.work.mkdir()
        self.mnt.mkdir()
        entries: list[Path] = []
        src_root = None
        if inputs_dir is not None and Path(inputs_dir).is_dir():
            src_root = Path(inputs_dir).resolve()
            entries = [p for p in sorted(src_root.rglob("*")) if not p.is_symlink()]  # never follow links out
        input_kb = sum(page_kb(p.stat().st_size) + 4 for p in entries) + page_kb(len((instruction or "").encode()))
        self._mount_quota(input_kb, len(entries))
        inputs = self.work / "inputs"
        inputs.mkdir()
        if src_root is not None:
            for src in entries:
                dst = inputs / src.relative_to(src_root)
                if src.is_dir():
                    dst.mkdir(parents=True, exist_ok=True)
                elif src.is_file():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    link_or_copy(src, dst)
        if instruction is not None:
            (self.work / "instruction.md").write_text(instruction, encoding="utf-8")
        (self.work / "outputs").mkdir()
        # inputs/ and instruction.md stay root's (read-only to the agent); the rest is the agent's
        for p in [inputs, *inputs.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        if self.as_root:
            os.chown(self.work, self.uid, self.uid)
            os.chown(self.work / "outputs", self.uid, self.uid)
        os.chmod(self.work, 0o755)
        return self

    # ------------------------------------------------------------------ running
    def command_argv(self, command: str) -> list[str]:
        lim = self.limits
        ns = ["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child=SIGKILL"]
        if not self.as_root:
            ns.append("--map-root-user")
        inner = ["chroot", str(self.mnt)]
        if self.as_root:
            inner += [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.uid}",
                "--clear-groups",
                "--no-new-privs",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
        inner += [
            "prlimit",
            f"--cpu={lim.cpu_s}",
            f"--as={lim.memory_mb * 1024 * 1024}",
            f"--nproc={lim.nproc}",
            f"--fsize={lim.fsize_mb * 1024 * 1024}",
            f"--nofile={lim.nofile}",
            "--core=0",
            "--",
            "/usr/bin/env",
            "-i",
            f"PATH={TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin",
            "HOME=/sandbox",
            "TMPDIR=/tmp",
            "LANG=C.UTF-8",
            "/bin/bash",
            "-c",
            f"cd {SANDBOX_MOUNT} && {command}",
        ]
        return ns + ["/bin/sh", "-c", SETUP_SCRIPT, "vbr-sandbox-setup", *inner]

    def _env(self) -> dict:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin",
            "VBR_ROOT": str(self.mnt),
            "VBR_WORK": str(self.work),
            "VBR_FFMPEG": self._ffmpeg,
            "VBR_FFPROBE": self._ffprobe or "",
            "VBR_FFPROBE_SHIM": FFPROBE_SHIM,
            "VBR_TOOLS_DIR": TOOLS_DIR,
            "VBR_ROOT_DIRS": " ".join(ROOT_DIRS),
            "VBR_ETC": " ".join(ETC_WHITELIST),
            "VBR_DEVICES": " ".join(DEVICES),
            "VBR_TMP_SIZE": f"{self.limits.tmp_mb}m",
        }

    def run(
        self, command: str, timeout_s: float = 120.0, stdin: bytes | None = None, max_output: int | None = None
    ) -> CommandResult:
        """Run ``command`` (bash) in the jail, cwd ``/sandbox``. The process tree is killed at ``timeout_s``.

        stdout and stderr are read while the command runs and at most ``max_output`` bytes of each (default
        ``limits.output_kb``) are kept, half from the start and half from the end: a command printing
        gigabytes cannot grow the harness's memory (``communicate()`` would buffer all of it)."""
        limit = int(max_output if max_output is not None else self.limits.output_kb * 1024)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            self.command_argv(command),
            env=self._env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        out, err = CappedStream(limit), CappedStream(limit)
        threads = [
            threading.Thread(target=pump, args=(proc.stdout.fileno(), out), daemon=True),
            threading.Thread(target=pump, args=(proc.stderr.fileno(), err), daemon=True),
            threading.Thread(target=feed_stdin, args=(proc.stdin, stdin or b""), daemon=True),
        ]
        for th in threads:
            th.start()
        timed_out = False
        try:
            proc.wait(timeout=max(0.1, timeout_s))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(proc)
            proc.wait()
        for th in threads:  # the namespace is gone, so the pipes are closed; a bound just in case
            th.join(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        return CommandResult(
            None if timed_out else proc.returncode,
            out.text(),
            err.text(),
            timed_out,
            time.monotonic() - t0,
            out.total,
            err.total,
        )

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        for sig in (signal.SIGKILL,):
            try:
                os.killpg(proc.pid, sig)  # unshare + its namespace's init; init's death kills the namespace
            except OSError:
                pass

    # ------------------------------------------------------------------ host-side access
    def resolve(self, path: str) -> Path:
        """A sandbox path (``/sandbox/x``, or relative to it) as a host path inside ``work``; else ValueError."""
        p = str(path).strip()
        if p == SANDBOX_MOUNT or p.startswith(SANDBOX_MOUNT + "/"):
            p = p[len(SANDBOX_MOUNT) :].lstrip("/")
        elif p.startswith("/"):
            raise ValueError(f"path {path!r} is outside {SANDBOX_MOUNT}")
        host = (self.work / p).resolve()
        if not host.is_relative_to(self.work):
            raise ValueError(f"path {path!r} escapes {SANDBOX_MOUNT}")
        return host

    def _open_regular(self, path: str | Path) -> tuple[int, os.stat_result, Path]:
        """An fd on a regular file of the sandbox: no symlink in any component, ``lstat`` says regular
        before opening (a FIFO or device is never opened), opened ``O_NOFOLLOW|O_NONBLOCK`` and checked again
        on the fd (the agent cannot swap the file in between: it would no longer be the same inode)."""
        host = Path(path)
        if not host.is_absolute():
            host = self.work / host
        rel = host.relative_to(self.work)
        cur = self.work
        for part in rel.parts:
            cur = cur / part
            if cur.is_symlink():
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: refusing to follow a symlink")
        before = os.lstat(host)
        if not stat.S_ISREG(before.st_mode):
            raise ValueError(f"{SANDBOX_MOUNT}/{rel}: not a regular file")
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            os.close(fd)
            raise ValueError(f"{SANDBOX_MOUNT}/{rel}: changed while being opened")
        return fd, st, rel

    def read_back(self, path: str | Path, max_bytes: int = 64 << 20) -> bytes:
        """Bytes of a regular file the agent wrote, refusing symlinks (any component), escapes, FIFOs and
        devices, and files larger than ``max_bytes``."""
        fd, st, rel = self._open_regular(path)
        try:
            if st.st_size > max_bytes:
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: {st.st_size} bytes, more than {max_bytes}")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(max_bytes + 1)[:max_bytes]
        finally:
            os.close(fd)

    def read_head(self, path: str | Path, max_bytes: int) -> tuple[bytes, int]:
        """The first ``max_bytes`` of a regular file and its size (same checks as :meth:`read_back`),
        without reading the rest into memory."""
        fd, st, _ = self._open_regular(path)
        try:
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(max(0, max_bytes)), st.st_size
        finally:
            os.close(fd)

    def copy_out(self, path: str | Path, dest: str | Path, max_bytes: int) -> int:
        """Stream a regular file of the sandbox to the host file ``dest`` (same checks as :meth:`read_back`);
        returns the bytes copied. Never holds the file in memory."""
        fd, st, rel = self._open_regular(path)
        try:
            if st.st_size > max_bytes:
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: {st.st_size} bytes, more than {max_bytes}")
            dest = Path(dest)
            tmp = dest.with_name(f".{dest.name}.part{os.getpid()}")
            n = 0
            with os.fdopen(fd, "rb", closefd=False) as src, open(tmp, "wb") as out:
                while n <= max_bytes:
                    chunk = src.read(min(1 << 20, max_bytes + 1 - n))
                    if not chunk:
                        break
                    out.write(chunk)
                    n += len(chunk)
            if n > max_bytes:  # grew while being copied
                tmp.unlink()
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: more than {max_bytes} bytes")
            os.replace(tmp, dest)
            return n
        finally:
            os.close(fd)

    def collect(self, names: list[str] | tuple[str, ...], dest: str | Path) -> list[str]:
        """Copy the deliverables found in ``/sandbox/outputs`` (regular files, no links) to ``dest``."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        got = []
        outputs = self.work / "outputs"
        if outputs.is_symlink() or not outputs.is_dir():
            return got
        for name in names:
            try:
                self.copy_out(outputs / name, dest / name, max_bytes=self.limits.fsize_mb << 20)
            except (OSError, ValueError) as exc:
                if not isinstance(exc, FileNotFoundError):
                    log.warning("agent sandbox %s: deliverable %s not collected: %s", self.root, name, exc)
                continue
            got.append(name)
        return got

    def cleanup(self, keep: bool = False) -> None:
        """Unmount ``/sandbox``'s tmpfs and delete what :meth:`prepare` made; ``keep=True`` keeps the files
        (copied from the tmpfs to disk first). Nothing is deleted when the marker is missing: the folder
        is then not ours (a path from bad data, a user's folder), and deleting it is never right."""
        if not self._ours():
            if self.root.exists():
                log.warning("agent sandbox: %s has no %s marker: not deleting anything there", self.root, MARKER)
            return
        if keep:
            if os.path.ismount(self.work):
                kept = self.root / "sandbox.kept"
                copy_tree(self.work, kept)
                self._unmount_work()
                os.rmdir(self.work)
                os.replace(kept, self.work)
            return
        self._remove_work()
        self.marker.unlink()
        try:
            self.root.rmdir()  # only if empty: anything else there is not ours
        except OSError:
            pass
