"""The denylist in the fabric's record: the file beside the state file (the state file untouched, a file that
is not a denylist never replaced) and etcd's key beside the failures (revision compare, leader fence)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.model.denylist import Denylist, to_text
from controller.state import denylistrec, etcdstore
from controller.state.etcdstore import EtcdStore
from controller.state.filestore import FileStore
from controller.state.store import Conflict, Deposed, StoreError, parse_url

DL = Denylist.from_reports({"h0": [("p0-t1-1", "p0-t0-0")]}, now=1000.0)


def test_the_file_store_keeps_the_denylist_beside_the_state_file(tmp_path):
    state = tmp_path / ".fabric-state.json"
    state.write_text('{"format": "srv6-fabric-state/1", "failures": []}\n')
    store = FileStore(state)
    assert store.load_denylist() == (Denylist(), 0)
    with store.locked(5.0):
        assert store.save_denylist(DL) == 0
    assert denylistrec.file_path(state) == tmp_path / ".fabric-state.denylist.json"
    assert (tmp_path / ".fabric-state.denylist.json").read_text() == to_text(DL)
    assert store.load_denylist() == (DL, 0)
    assert state.read_text() == '{"format": "srv6-fabric-state/1", "failures": []}\n'


def test_the_file_store_never_replaces_a_file_that_is_not_a_denylist(tmp_path):
    state = tmp_path / "s.json"
    other = tmp_path / "s.denylist.json"
    other.write_text('{"mine": 1}\n')
    store = FileStore(state)
    with pytest.raises(StoreError) as e:
        store.load_denylist()
    assert str(e.value).startswith(f"denylist file {other}: not a denylist document")
    with pytest.raises(StoreError):
        store.save_denylist(DL)
    assert other.read_text() == '{"mine": 1}\n'


class Kv:
    """An etcd key space in memory: get, and txn with mod_revision / create_revision compares."""

    def __init__(self) -> None:
        self.kvs: dict[str, dict[str, Any]] = {}
        self.rev = 10
        self.txns: list[dict[str, Any]] = []

    def get(self, key: str, **fields: Any) -> list[dict[str, Any]]:
        return [dict(self.kvs[key], key=key)] if key in self.kvs else []

    def txn(self, payload: dict[str, Any]) -> dict[str, Any]:
        import base64
        self.txns.append(payload)
        for c in payload["compare"]:
            kv = self.kvs.get(base64.b64decode(c["key"]).decode())
            target = "mod_revision" if c["target"] == "MOD" else "create_revision"
            if (int(kv[target]) if kv else 0) != c[target]:
                return {"succeeded": False, "responses": []}
        for op in payload["success"]:
            put = op["request_put"]
            key = base64.b64decode(put["key"]).decode()
            self.rev += 1
            old = self.kvs.get(key)
            self.kvs[key] = {"value": base64.b64decode(put["value"]).decode(), "mod_revision": self.rev,
                             "create_revision": old["create_revision"] if old else self.rev}
        return {"succeeded": True, "header": {"revision": self.rev}}


def etcd(kv: Kv) -> EtcdStore:
    s = EtcdStore(parse_url("etcd://127.0.0.1:1"), "lab")
    s.client = kv  # type: ignore[assignment]
    return s


def test_etcd_keeps_the_denylist_under_its_own_key_compared_by_revision():
    kv = Kv()
    s = etcd(kv)
    assert s.load_denylist() == (Denylist(), 0)
    rev = s.save_denylist(DL, expect=0)
    assert kv.kvs["/srv6-fabric/lab/denylist"]["value"] == to_text(DL) and "/srv6-fabric/lab/failures" not in kv.kvs
    assert s.load_denylist() == (DL, rev)
    with pytest.raises(Conflict, match=r"the denylist changed \(revision 0 -> 11\) since it was read"):
        s.save_denylist(Denylist(), expect=0)
    assert s.load_denylist() == (DL, rev)


def test_a_deposed_leaders_denylist_is_not_saved():
    kv = Kv()
    kv.kvs["/srv6-fabric/lab/leader"] = {"value": "other", "mod_revision": 57, "create_revision": 57}
    s = etcd(kv)
    s.leader_revision = 41
    with pytest.raises(Deposed, match="denylist not saved: this controller no longer leads"):
        s.save_denylist(DL)
    assert "/srv6-fabric/lab/denylist" not in kv.kvs
    leader = {"key": etcdstore.b64("/srv6-fabric/lab/leader"), "result": "EQUAL", "target": "CREATE",
              "create_revision": 41}
    assert leader in kv.txns[0]["compare"]
