"""The fabric-wide denylist in the fabric's record, beside the failures and under the same lock or fencing:

    state file     STATE.denylist.json beside the state file (.fabric-state.json: .fabric-state.denylist.json),
                   written under the state file's lock (Store.locked)
    etcd           /srv6-fabric/<fabric>/denylist (etcdstore.EtcdStore.save_denylist), changed only by
                   transactions that compare its mod_revision with the one read and, for a leader, the leader
                   key's create revision

The document is controller.model.denylist's.
"""

from __future__ import annotations

from pathlib import Path

from controller.files.safefile import UnsafeFile, read_text, write_atomic
from controller.model.denylist import Denylist, DenylistError, from_text, to_text
from controller.model import limits


def file_path(state: str | Path) -> Path:
    """The denylist file beside a state file."""
    p = Path(state)
    return p.with_name(f"{p.stem}.denylist.json")


def load_file(path: str | Path) -> Denylist:
    """The denylist in `path`; an absent file is an empty list. DenylistError naming the file otherwise."""
    try:
        text = read_text(path, limits.MAX_STATE_BYTES, "denylist file")
    except FileNotFoundError:
        return Denylist()
    except OSError as e:
        raise DenylistError(str(e) if isinstance(e, UnsafeFile) else f"cannot read denylist file {path}: {e}") from None
    try:
        return from_text(text)
    except DenylistError as e:
        raise DenylistError(f"denylist file {path}: {e}") from None


def save_file(path: str | Path, dl: Denylist) -> None:
    """Write the denylist whole or not at all; a file that is not a denylist is refused, never replaced."""
    try:
        write_atomic(path, to_text(dl), what="denylist file", ours=load_file)
    except (UnsafeFile, DenylistError) as e:
        raise DenylistError(str(e)) from None
    except OSError as e:
        raise DenylistError(f"cannot write denylist file {path}: {e.strerror or e}") from None

