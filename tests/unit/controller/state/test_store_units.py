"""The store interface: etcd URLs, and the file backend saying exactly what the state-file functions say."""

from __future__ import annotations

from tests.paths import REPO

from pathlib import Path

import pytest

from controller import exitcodes
from controller import failurerecord
from controller.state.statefile import save_state
from controller.model.failures import LinkDown, SwitchDown
from controller.state.filestore import FileStore
from controller.state.leader import election_id_of
from controller.state.backends import open_store
from controller.state.store import StoreError, parse_url
from controller.model.topology import load

LAB = REPO / "examples" / "two_plane_lab.yaml"


def test_etcd_urls() -> None:
    assert parse_url("etcd://10.0.0.1:2379,10.0.0.2:2380,host-3").endpoints == (
        ("10.0.0.1", 2379), ("10.0.0.2", 2380), ("host-3", 2379))
    assert parse_url("etcd://[::1]:2379").endpoints == (("::1", 2379),)
    assert str(parse_url("etcd://a:1,b:2")) == "etcd://a:1,b:2"


@pytest.mark.parametrize("url, message", [
    ("http://a:2379", "expected etcd://HOST:PORT[,HOST:PORT...]"),
    ("etcd://a:2379,,b", "'' is not HOST:PORT"),
    ("etcd://a:99999", "port 99999 is not 1..65535"),
    ("etcd://a b:1", "'a b:1' is not HOST:PORT"),
])
def test_bad_etcd_urls_are_one_line(url: str, message: str) -> None:
    with pytest.raises(StoreError) as e:
        parse_url(url)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_file_store_is_the_default_and_reads_what_ops_reads(tmp_path: Path) -> None:
    topo = load(LAB)
    state = tmp_path / ".fabric-state.json"
    store = open_store(None, state, "ignored")
    assert isinstance(store, FileStore) and store.load_rev() == ({}, 0)
    store.save({LinkDown("p0-t0-0", "p0-t1-1")}, None, expect=0)
    assert store.recorded(topo) == failurerecord.load_recorded(topo, state)
    save_state(state, [SwitchDown("p9-t1-9")])  # names what the topology lacks
    with pytest.raises(StoreError) as mine:
        store.recorded(topo)
    with pytest.raises(exitcodes.OpError) as theirs:
        failurerecord.load_recorded(topo, state)
    assert str(mine.value) == str(theirs.value)
    known, dropped, _ = store.known_rev(topo)
    assert (known, dropped) == ({}, [SwitchDown("p9-t1-9")])


def test_a_file_that_is_not_a_state_file_is_refused_and_kept(tmp_path: Path) -> None:
    other = tmp_path / "plan.json"
    other.write_text('{"format": "srv6-fabric-plan/1"}\n')
    with pytest.raises(StoreError) as e:
        FileStore(other).save({SwitchDown("p0-t1-0")})
    assert "refus" in str(e.value) or "not a" in str(e.value)
    assert other.read_text() == '{"format": "srv6-fabric-plan/1"}\n'


def test_each_later_win_has_a_higher_election_id() -> None:
    ids = [election_id_of(r) for r in (2, 3, 41, 1 << 40)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert election_id_of(2) >> 64 == 2 and election_id_of(2) & ((1 << 64) - 1) == 0


WANTS_A_CERTIFICATE = ("TLS: it ended the handshake (it wants a client certificate signed by its trusted CA: "
                       "?cert=FILE&key=FILE)")


@pytest.mark.parametrize("seen", [
    # what a client without a certificate, or with one the member does not trust, sees, by the handshake's timing
    "SSLError(1, '[SSL: SSLV3_ALERT_BAD_CERTIFICATE] sslv3 alert bad certificate (_ssl.c:2580)')",
    "SSLError(1, '[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required (_ssl.c:2580)')",
    "SSLError(1, '[SSL: TLSV1_ALERT_UNKNOWN_CA] tlsv1 alert unknown ca (_ssl.c:2580)')",
    "SSLEOFError(8, '[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:1006)')",
])
def test_a_member_refusing_our_certificate_is_named_so_whatever_the_timing(seen: str) -> None:
    from controller.state.etcdstore import _tls_failure
    assert _tls_failure(f"HTTPSConnectionPool(host='127.0.0.1', port=2379): Max retries exceeded ({seen})") \
        == WANTS_A_CERTIFICATE


def test_other_tls_failures_keep_their_own_words() -> None:
    from controller.state.etcdstore import _tls_failure
    assert _tls_failure("SSLError(1, '[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)')") \
        == "TLS: it does not speak TLS (a plain member: use etcd://)"
    assert _tls_failure("SSLError(1, '[SSL: NO_CIPHERS_AVAILABLE] no ciphers available')") \
        == "TLS: 1, '[SSL: NO_CIPHERS_AVAILABLE] no ciphers available'"
