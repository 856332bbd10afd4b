"""Reading and writing our files safely: capped reads of regular files only, atomic writes that keep
the target's mode, write through symlinks and never leave a visible temporary file behind."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

MiB = 1 << 20
_TMP = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[^.]+\.tmp$")


class UnsafeFile(OSError):
    """A path we refuse to read or write (not a regular file, too large, not ours); one line."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: str | Path, what: str = "file") -> os.stat_result | None:
    """The stat of `path` (symlinks followed) if it is a regular file, None if absent; UnsafeFile for a
    directory, FIFO, device or socket, before anything opens it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{what} {path} is {_kind(st.st_mode)}, not a regular file")
    return st


def open_regular(path: str | Path, limit: int, what: str = "file") -> BinaryIO:
    """A regular file of at most `limit` bytes, open for reading (UnsafeFile otherwise, before any
    byte is read; FileNotFoundError if absent). Never blocks on a FIFO."""
    if check_regular(path, what) is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    fh = os.fdopen(fd, "rb")
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:  # replaced between the stat and the open
        fh.close()
        raise UnsafeFile(f"{what} {path} is {_kind(st.st_mode)}, not a regular file" if not stat.S_ISREG(st.st_mode)
                         else f"{what} {path} is larger than {_size(limit)}")
    return fh


def read_bytes(path: str | Path, limit: int, what: str = "file") -> bytes:
    """The contents of a regular file of at most `limit` bytes (open_regular), never more than
    limit + 1 bytes read even if it grows."""
    with open_regular(path, limit, what) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{what} {path} is larger than {_size(limit)}")
    return data


def read_text(path: str | Path, limit: int, what: str = "file") -> str:
    """read_bytes decoded as UTF-8 (UnsafeFile naming the file if it is not text)."""
    try:
        return read_bytes(path, limit, what).decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeFile(f"{what} {path} is not UTF-8 text (byte {e.start})") from None


def marked(marker: str, what: str) -> Callable[[Path], None]:
    """An `ours` check for write_atomic: the existing file is empty or a JSON document that starts
    with {"format": marker (only its first 4 KiB are read); UnsafeFile otherwise."""
    pattern = re.compile(rb'^\s*\{\s*"format"\s*:\s*"' + re.escape(marker.encode()) + rb'"')

    def check(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(4096)
        if head.strip() and not pattern.match(head):
            raise UnsafeFile(f"{path} exists and is not a {what} (no \"format\": \"{marker}\"): "
                             "refusing to overwrite it")
    return check


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB and n % MiB == 0 else f"{n} bytes"


def target(path: str | Path) -> Path:
    """Where a write to `path` lands: the end of its symlink chain (written through, never replaced)."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the hidden temporary files an interrupted write to `path` left (their writer is gone)."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            m = _TMP.match(entry.name)
            if m is None or m["name"] != path.name or pid_alive(int(m["pid"])):
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_atomic(path: str | Path, text: str, *, what: str = "file",
                 ours: Callable[[Path], object] | None = None) -> None:
    """Write `text` to `path` whole or not at all (open_atomic)."""
    with open_atomic(path, what=what, ours=ours) as fh:
        fh.write(text)


@contextlib.contextmanager
def open_atomic(path: str | Path, *, what: str = "file",
                ours: Callable[[Path], object] | None = None) -> Iterator[TextIO]:
    """A text file to write in pieces that replaces `path` only when the block ends without an error.

    A symlink is written through (its target is replaced, the link stays); a directory, FIFO,
    device or socket is refused before anything is written; `ours(target)`, when given, raises if
    an existing file is not one of ours. The data goes to a hidden `.<name>.<pid>.<rand>.tmp` beside
    the target, then is renamed over it: a reader sees the old file or the new one. The target keeps
    its mode (a new file gets 0666 minus the umask). On an error the temporary file is removed; one
    a killed writer left is removed by the next write.
    """
    dest = target(path)
    st = check_regular(dest, what)
    if st is not None and ours is not None:
        ours(dest)
    remove_stale_temps(dest)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.{os.getpid()}.", suffix=".tmp")
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
