"""What an agent sandbox is built from, and whether this host can build one (``agents/sandbox.py`` runs it).

The paths inside the jail (``SANDBOX_MOUNT``, ``TOOLS_DIR``), what of the host it sees (``ETC_WHITELIST``,
``DEVICES``, ``ROOT_DIRS``), the shell script that builds its private root in the new namespaces
(``SETUP_SCRIPT``), the ffmpeg it is given (``ffmpeg_exe``, mounted from a neutral path: ``neutral_tool``) and the
``ffprobe`` stand-in (``FFPROBE_SHIM``), the per-rollout uid, and the file helpers that fill ``/sandbox/inputs``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
import threading
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


def uid_for(key: str, limits: SandboxLimits) -> int:
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


def page_kb(size: int) -> int:
    return -(-size // 4096) * 4


def link_or_copy(src: Path, dst: Path) -> None:
    st = src.stat()
    if not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def copy_tree(src: Path, dst: Path) -> None:
    """Copy folders, regular files and symlinks (as links) from ``src`` to ``dst``; skip FIFOs, sockets and
    devices (``shutil.copytree`` would open a FIFO and block forever)."""
    dst.mkdir()
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir(follow_symlinks=False):
            copy_tree(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            shutil.copy2(entry.path, target, follow_symlinks=False)
