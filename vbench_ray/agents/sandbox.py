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

The inputs of a task are hard-linked (copied when linking is impossible or the source is writable by
others) into ``/sandbox/inputs``, owned by root and read-only to the agent; the agent writes its
deliverables to ``/sandbox/outputs``. The harness reads files back only through :meth:`Sandbox.read_back`,
which refuses symlinks and anything that resolves outside the sandbox.

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
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

log = logging.getLogger(__name__)

SANDBOX_MOUNT = "/sandbox"
TOOLS_DIR = "/opt/vbr/bin"
ETC_WHITELIST = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "localtime",
                 "mime.types")
DEVICES = ("null", "zero", "random", "urandom")
ROOT_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")

FFPROBE_SHIM = r"""#!/bin/bash
# vbench-ray ffprobe STAND-IN (no real ffprobe on the host): prints `ffmpeg -i` stream info and key=value lines.
# Supported: `ffprobe FILE`, and duration queries such as `ffprobe -v error -show_entries format=duration -of csv=p=0 FILE`.
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
if [[ "$info" =~ Video:\ [^$'\n']*[\ ,]([0-9]{2,5})x([0-9]{2,5}) ]]; then echo "width=${BASH_REMATCH[1]}"; echo "height=${BASH_REMATCH[2]}"; fi
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
  elif [ -d "/$d" ]; then mkdir "$R/$d"; mount --rbind "/$d" "$R/$d"; mount -o remount,bind,ro "$R/$d" 2>/dev/null || true; fi
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
    cpu_s: int = 600            # RLIMIT_CPU per process (CPU seconds)
    memory_mb: int = 8192       # RLIMIT_AS per process (address space, MiB)
    nproc: int = 256            # RLIMIT_NPROC (processes of the sandbox uid; enforced only for non-root)
    fsize_mb: int = 4096        # RLIMIT_FSIZE (largest file a command may write, MiB)
    nofile: int = 1024          # RLIMIT_NOFILE
    tmp_mb: int = 1024          # size of the private /tmp (tmpfs)
    uid_base: int = 200000      # per-rollout uid = uid_base + hash(rollout) % uid_span (root only)
    uid_span: int = 100000


@dataclass
class CommandResult:
    exit_code: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float


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
        proc = subprocess.run(["unshare", "--net", "--mount", "--pid", "--fork", *flags, "true"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unshare failed: {exc}"
    if proc.returncode != 0:
        return f"unshare --net --mount --pid failed (namespaces unavailable?): {proc.stderr.strip()[:300]}"
    return None


def _uid_for(key: str, limits: SandboxLimits) -> int:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)
    return limits.uid_base + h % limits.uid_span


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

    ``Sandbox(root, key)``: ``root/sandbox`` is the agent's ``/sandbox``; ``root/.mnt`` an empty mount point.
    ``prepare(inputs_dir, instruction)`` fills it; ``run(command, timeout_s)`` runs a command inside.
    """

    def __init__(self, root: str | Path, key: str, limits: SandboxLimits | None = None):
        self.root = Path(root).resolve()
        self.work = self.root / "sandbox"
        self.mnt = self.root / ".mnt"
        self.key = key
        self.limits = limits or SandboxLimits()
        self.as_root = os.geteuid() == 0
        self.uid = _uid_for(key, self.limits) if self.as_root else os.geteuid()
        self._ffmpeg = ffmpeg_exe()
        self._ffprobe = host_ffprobe()

    # ------------------------------------------------------------------ setup
    def prepare(self, inputs_dir: str | Path | None, instruction: str | None = None) -> "Sandbox":
        """Create ``/sandbox`` with ``inputs/`` (linked, read-only to the agent), ``outputs/`` and
        ``instruction.md``. Only the task's public inputs go in; never ``truth/``."""
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        self.mnt.mkdir(parents=True, exist_ok=True)
        inputs = self.work / "inputs"
        inputs.mkdir()
        if inputs_dir is not None and Path(inputs_dir).is_dir():
            src_root = Path(inputs_dir).resolve()
            for src in sorted(src_root.rglob("*")):
                if src.is_symlink():
                    continue  # never follow links out of the bundle
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
            inner += ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--no-new-privs",
                      "--inh-caps=-all", "--bounding-set=-all", "--"]
        inner += ["prlimit", f"--cpu={lim.cpu_s}", f"--as={lim.memory_mb * 1024 * 1024}", f"--nproc={lim.nproc}",
                  f"--fsize={lim.fsize_mb * 1024 * 1024}", f"--nofile={lim.nofile}", "--core=0", "--",
                  "/usr/bin/env", "-i", f"PATH={TOOLS_DIR}:/usr/local/bin:/usr/bin:/bin", "HOME=/sandbox",
                  "TMPDIR=/tmp", "LANG=C.UTF-8", "/bin/bash", "-c", f"cd {SANDBOX_MOUNT} && {command}"]
        return ns + ["/bin/sh", "-c", SETUP_SCRIPT, "vbr-sandbox-setup", *inner]

    def _env(self) -> dict:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin", "VBR_ROOT": str(self.mnt),
                "VBR_WORK": str(self.work), "VBR_FFMPEG": self._ffmpeg, "VBR_FFPROBE": self._ffprobe or "",
                "VBR_FFPROBE_SHIM": FFPROBE_SHIM, "VBR_TOOLS_DIR": TOOLS_DIR, "VBR_ROOT_DIRS": " ".join(ROOT_DIRS),
                "VBR_ETC": " ".join(ETC_WHITELIST), "VBR_DEVICES": " ".join(DEVICES),
                "VBR_TMP_SIZE": f"{self.limits.tmp_mb}m"}

    def run(self, command: str, timeout_s: float = 120.0, stdin: bytes | None = None,
            max_output: int = 1 << 20) -> CommandResult:
        """Run ``command`` (bash) in the jail, cwd ``/sandbox``. The process tree is killed at ``timeout_s``."""
        t0 = time.monotonic()
        proc = subprocess.Popen(self.command_argv(command), env=self._env(), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(stdin or b"", timeout=max(0.1, timeout_s))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill(proc)
            out, err = proc.communicate()
        return CommandResult(None if timed_out else proc.returncode, out[-max_output:].decode("utf-8", "replace"),
                             err[-max_output:].decode("utf-8", "replace"), timed_out, time.monotonic() - t0)

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
            p = p[len(SANDBOX_MOUNT):].lstrip("/")
        elif p.startswith("/"):
            raise ValueError(f"path {path!r} is outside {SANDBOX_MOUNT}")
        host = (self.work / p).resolve()
        if not host.is_relative_to(self.work):
            raise ValueError(f"path {path!r} escapes {SANDBOX_MOUNT}")
        return host

    def read_back(self, path: str | Path, max_bytes: int = 64 << 20) -> bytes:
        """Bytes of a regular file the agent wrote, refusing symlinks (any component) and escapes."""
        host = Path(path)
        if not host.is_absolute():
            host = self.work / host
        rel = host.relative_to(self.work)
        cur = self.work
        for part in rel.parts:
            cur = cur / part
            if cur.is_symlink():
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: refusing to follow a symlink")
        fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: not a regular file")
            if st.st_size > max_bytes:
                raise ValueError(f"{SANDBOX_MOUNT}/{rel}: {st.st_size} bytes, more than {max_bytes}")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                return fh.read(max_bytes + 1)[:max_bytes]
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
                data = self.read_back(outputs / name, max_bytes=self.limits.fsize_mb << 20)
            except (OSError, ValueError):
                continue
            (dest / name).write_bytes(data)
            got.append(name)
        return got

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
