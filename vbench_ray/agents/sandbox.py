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

import hashlib
import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

SANDBOX_MOUNT = "/sandbox"
TOOLS_DIR = "/opt/vbr/bin"
ETC_WHITELIST = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "localtime", "mime.types")
DEVICES = ("null", "zero", "random", "urandom")
ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
MARKER = ".vbr-sandbox"  # in Sandbox.root: this class made the folder, so cleanup may delete what it made
READ_CHUNK = 1 << 16

FFPROBE_SHIM = r"""#!/bin/bash
# vbench-ray ffprobe STAND-IN (no real ffprobe on the host): prints `ffmpeg -i` stream info and key=value lines.
# Supported: `ffprobe FILE`, and duration queries such as
# `ffprobe -v error -show_entries format=duration -of csv=p=0 FILE`.
file=""; only_duration=0
for a in "$@"; do
  case "$a" in *duration*) only_duration=1 ;; esac
  file="$a"
done
[ -n "$file" ] || { echo "usage: ffprobe FILE" >&2; exit 1; }
[ -e "$file" ] || { echo "$file: No such file or directory" >&2; exit 1; }
info=$(ffmpeg -hide_banner -i "$file" 2>&1)
dur=""
if [[ "$info" =~ Duration:\ ([0-9]+):([0-9]+):([0-9]+)\.([0-9]+) ]]; then
  m=("${BASH_REMATCH[@]}")
  dur="$((10#${m[1]} * 3600 + 10#${m[2]} * 60 + 10#${m[3]})).${m[4]}"
fi
if [ "$only_duration" = 1 ]; then [ -n "$dur" ] && echo "$dur" && exit 0; echo "N/A"; exit 1; fi
printf '%s\n' "$info" | grep -v "At least one output file"
echo "duration=${dur:-N/A}"
if [[ "$info" =~ Video:\ [^$'\n']*[\ ,]([0-9]{2,5})x([0-9]{2,5}) ]]; then
  echo "width=${BASH_REMATCH[1]}"; echo "height=${BASH_REMATCH[2]}"
fi
if [[ "$info" =~ ([0-9.]+)\ fps ]]; then echo "fps=${BASH_REMATCH[1]}"; fi
[ -n "$dur" ]
"""

SETUP_SCRIPT = r"""
set -eu
R="$VBR_ROOT"
mount --make-rprivate /
mount -t tmpfs -o size=16m,mode=755 vbr-root "$R"
for d in $VBR_ROOT_DIRS; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$R/$d";
  elif [ -d "/$d" ]; then
    mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d" 2>/dev/null || true
  fi
done
mkdir -p "$R/etc" "$R/dev" "$R/proc" "$R/tmp" "$R/sandbox" "$R$VBR_TOOLS_DIR"
for f in $VBR_ETC; do [ -f "/etc/$f" ] && cp "/etc/$f" "$R/etc/$f" || true; done
for n in $VBR_DEVICES; do touch "$R/dev/$n"; mount --bind "/dev/$n" "$R/dev/$n"; done
mount -t tmpfs -o size="$VBR_TMP_SIZE",mode=1777,nosuid,nodev vbr-tmp "$R/tmp"
mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
mount --bind "$VBR_WORK" "$R/sandbox"
touch "$R$VBR_TOOLS_DIR/ffmpeg"; mount --bind "$VBR_FFMPEG" "$R$VBR_TOOLS_DIR/ffmpeg"
mount -o remount,bind,ro "$R$VBR_TOOLS_DIR/ffmpeg" 2>/dev/null || true
if [ -n "$VBR_FFPROBE" ]; then touch "$R$VBR_TOOLS_DIR/ffprobe"; mount --bind "$VBR_FFPROBE" "$R$VBR_TOOLS_DIR/ffprobe";
else printf '%s' "$VBR_FFPROBE_SHIM" > "$R$VBR_TOOLS_DIR/ffprobe"; chmod 755 "$R$VBR_TOOLS_DIR/ffprobe"; fi
mount -o remount,bind,ro "$R" 2>/dev/null || mount -o remount,ro "$R"
exec "$@"
"""


class SandboxError(RuntimeError):
    """The sandbox cannot be built (missing kernel feature or tool): the message says which."""


@dataclass
class SandboxLimits:
    """Per-command limits. The paper's sandboxes had 4 vCPU and 8 GB (App. A.3)."""

    cpu_s: int = 600  # RLIMIT_CPU per process (CPU seconds)
    memory_mb: int = 8192  # RLIMIT_AS per process (address space, MiB)
    nproc: int = 256  # RLIMIT_NPROC (processes of the sandbox uid; enforced only for non-root)
    fsize_mb: int = 4096  # RLIMIT_FSIZE (largest file a command may write, MiB)
    nofile: int = 1024  # RLIMIT_NOFILE
    tmp_mb: int = 1024  # size of the private /tmp (tmpfs)
    disk_mb: int = 4096  # total the agent may write under /sandbox (a tmpfs: memory-backed); 0: no quota
    disk_inodes: int = 100000  # files and folders the agent may create under /sandbox
    output_kb: int = 1024  # stdout (and stderr) kept per command: head + tail, the middle is cut
    uid_base: int = 200000  # per-rollout uid = uid_base + hash(rollout) % uid_span (root only)
    uid_span: int = 100000


@dataclass
class CommandResult:
    exit_code: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    stdout_bytes: int = 0  # what the command wrote in all (stdout/stderr hold at most a head and a tail)
    stderr_bytes: int = 0


class _Capped:
    """A stream's first and last bytes and its total length: memory stays bounded whatever a command prints."""

    def __init__(self, limit: int):
        self.head_max = max(0, limit) // 2
        self.tail_max = max(0, limit) - self.head_max
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if len(self.head) < self.head_max:
            take = self.head_max - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if chunk and self.tail_max:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_max:  # trim in bulk: amortised O(1) per byte
                del self.tail[: len(self.tail) - self.tail_max]

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_max :]) if self.tail_max else b""
        cut = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "replace")
        if cut <= 0:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        return (
            f"{head}\n... [{cut} bytes cut: the command wrote {self.total} bytes; first and last "
            f"{len(self.head) + len(tail)} kept] ...\n{tail.decode('utf-8', 'replace')}"
        )


def _pump(fd: int, sink: _Capped) -> None:
    while True:
        try:
            chunk = os.read(fd, READ_CHUNK)
        except OSError:
            return
        if not chunk:
            return
        sink.feed(chunk)


def _feed_stdin(stream, data: bytes) -> None:
    try:
        if data:
            stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            stream.close()
        except (BrokenPipeError, OSError):
            pass


def ffmpeg_exe() -> str:
    try:
        import imageio_ffmpeg
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise SandboxError("imageio-ffmpeg is not installed: the sandbox's ffmpeg comes from it") from exc
    return imageio_ffmpeg.get_ffmpeg_exe()


def host_ffprobe() -> Optional[str]:
    return shutil.which("ffprobe")


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise SandboxError(f"`{tool}` not found on PATH (util-linux): the agent sandbox needs it")
    return path


def check_support() -> Optional[str]:
    """None when sandboxes can be built here, else the reason (missing tool or kernel feature)."""
    try:
        for tool in ("unshare", "chroot", "setpriv", "prlimit", "mount"):
            _need(tool)
    except SandboxError as exc:
        return str(exc)
    flags = [] if os.geteuid() == 0 else ["--map-root-user"]
    try:
        proc = subprocess.run(
            ["unshare", "--net", "--mount", "--pid", "--fork", *flags, "true"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if proc.returncode != 0:
        return f"unshare --net --mount --pid failed (namespaces unavailable?): {proc.stderr.strip()[:300]}"
    return None


def _uid_for(key: str, limits: SandboxLimits) -> int:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
    return limits.uid_base + h % limits.uid_span


@lru_cache(maxsize=None)
def neutral_tool(src: str) -> str:
    """``src`` reached through a neutral path: a hard link (a copy on another filesystem) in a private
    folder ``/var/tmp/vbench-ray-tools-<uid>/`` (mode 0700, checked to be ours).

    Why: a bind mount's source path shows in ``/proc/self/mountinfo`` inside the sandbox; mounting ffmpeg
    from the virtualenv would tell the agent where the harness is installed (user names, project paths).
    Falls back to ``src`` (with a warning) when the folder cannot be made safely.
    """
    uid = os.geteuid()
    base = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path(tempfile.gettempdir())
    folder = base / f"vbench-ray-tools-{uid}"
    try:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
            raise OSError(f"{folder} is not a private folder of uid {uid}")
        sst = os.stat(src)
        tag = hashlib.sha256(f"{os.path.realpath(src)}|{sst.st_size}|{sst.st_mtime_ns}".encode()).hexdigest()[:12]
        target = folder / f"{Path(src).name.split('-')[0]}-{tag}"
        try:
            tst = os.lstat(target)
            if stat.S_ISREG(tst.st_mode) and tst.st_size == sst.st_size:
                return str(target)
        except FileNotFoundError:
            pass
        tmp = folder / f".{target.name}.{os.getpid()}.{threading.get_ident()}"
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copy2(src, tmp)
            os.chmod(tmp, 0o755)
        os.replace(tmp, target)
        return str(target)
    except OSError as exc:
        log.warning(
            "agent sandbox: %s is mounted from its own path, which the agent can read in /proc/self/mountinfo (%s)",
            src,
            exc,
        )
        return src


def _page_kb(size: int) -> int:
    return -(-size // 4096) * 4


def _link_or_copy(src: Path, dst: Path) -> None:
    st = src.stat()
    if not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


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
        self.uid = _uid_for(key, self.limits) if self.as_root else os.geteuid()
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
        input_kb = sum(_page_kb(p.stat().st_size) + 4 for p in entries) + _page_kb(len((instruction or "").encode()))
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
                    _link_or_copy(src, dst)
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
        out, err = _Capped(limit), _Capped(limit)
        threads = [
            threading.Thread(target=_pump, args=(proc.stdout.fileno(), out), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr.fileno(), err), daemon=True),
            threading.Thread(target=_feed_stdin, args=(proc.stdin, stdin or b""), daemon=True),
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
                _copy_tree(self.work, kept)
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


def _copy_tree(src: Path, dst: Path) -> None:
    """Copy folders, regular files and symlinks (as links) from ``src`` to ``dst``; skip FIFOs, sockets and
    devices (``shutil.copytree`` would open a FIFO and block forever)."""
    dst.mkdir()
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir(follow_symlinks=False):
            _copy_tree(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            shutil.copy2(entry.path, target, follow_symlinks=False)
