"""Which store a `--store` value names: the state file (the default) or an etcd cluster."""

from __future__ import annotations

from pathlib import Path

from controller.state.filestore import FileStore
from controller.state.store import Store, parse_url


def open_store(url: str | None, state: Path | None, fabric: str, timeout: float = 5.0) -> Store:
    """The store a `--store` value names: None or '' is the state file `state`."""
    if not url:
        return FileStore(state)
    from controller.state.etcdstore import EtcdStore  # etcd3gw, requests and the rest: only for an etcd store (~8 MB of RSS)

    return EtcdStore(parse_url(url), fabric, timeout=timeout)
