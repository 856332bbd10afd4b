"""TLS and mutual TLS on P4Runtime against simple_switch_grpc's own TLS (--grpc-server-ssl ...), with
certificates made at test time: the right client installs and reads back; a client without a
certificate, with one from another CA, in plaintext, or trusting another CA is refused, saying why;
fabricctl install / fail / status / shell end to end on TLS switches (unix sockets and TCP).

Starts more than one switch: run under the machine-wide lock (flock /tmp/srv6-heavy.lock ...).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import yaml

from controller import planning
from controller.runtime import encoding
from controller.model import topology
from controller.plan.entries import Entity
from controller.model.failures import LinkDown
from controller.runtime.p4info import P4Info
from controller.runtime.p4rt import P4RuntimeError, SwitchConnection
from controller.plan.fabricplan import plan as make_plan
from controller.model.tlsconfig import TlsConfig
from controller.programs.toolchain import REPO_ROOT, Artifacts
from mininet_labs.bmv2proc import ServerTls
from mininet_labs.nsswitch import NetnsSwitch
from tests.bmv2.conftest import require_bmv2
from tests.bmv2.fabric_fixture import FabricLab, differences, start_lab
from mininet_labs import pki as labpki

ARTIFACTS = Artifacts.of("srv6_spray")
LEAF, SPINE = "p0-t0-0", "p0-t1-1"


@dataclass(frozen=True)
class Pki(labpki.Pki):
    """The lab PKI (a CA, the switches' certificate, our client certificate), and another CA with a
    client certificate of its own, which the switches must refuse."""

    other_ca: Path = Path()
    other_cert: Path = Path()
    other_key: Path = Path()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if labpki.openssl() is None:
        pytest.skip("openssl not found on PATH (the TLS tests make their certificates with it)")
    d = tmp_path_factory.mktemp("pki")
    ours = labpki.make_pki(d)
    other_ca = labpki.make_ca(d, "other-ca")
    other = labpki.make_cert(d, "intruder", other_ca, labpki.CLIENT_EXT)
    return Pki(**asdict(ours), other_ca=other_ca[0], other_cert=other[0], other_key=other[1])


def good(pki: Pki, **kw: object) -> TlsConfig:
    """The client settings the switches accept."""
    return TlsConfig(pki.ca, pki.client_cert, pki.client_key, **kw)  # type: ignore[arg-type]


def mutual(pki: Pki) -> ServerTls:
    return ServerTls(pki.server_cert, pki.server_key, client_ca=pki.ca)


@pytest.fixture(scope="module")
def mtls_switch(pki: Pki) -> Iterator[NetnsSwitch]:
    """One switch whose P4Runtime server wants mutual TLS (client certificates signed by pki.ca)."""
    require_bmv2()
    with NetnsSwitch(f"tls{os.getpid()}", ports=(1, 2, 3), server_tls=mutual(pki), client_tls=good(pki)) as sw:
        yield sw


def leaf_plan() -> tuple[P4Info, list[Entity]]:
    """What a leaf of a small fabric holds: routes, members, groups (in read-back form)."""
    p4info = P4Info.load(ARTIFACTS.p4info)
    topo = topology.build(1, 2, 1, 2)
    encoded = encoding.encode(make_plan(planning.fabric(topo, "srv6_spray")), [LEAF], p4info, "srv6_spray")
    return p4info, encoded.desired[LEAF]


def connect(sw: NetnsSwitch, tls: TlsConfig | None, timeout: float = 10) -> SwitchConnection:
    conn = SwitchConnection("leaf", sw.grpc_address, sw.device_id, election_id=10, tls=tls, timeout=timeout)
    conn.connect()
    return conn


# --- one switch, one client at a time --------------------------------------------------------

def test_mutual_tls_client_installs_and_reads_back(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    p4info, entities = leaf_plan()
    with connect(mtls_switch, good(pki)) as conn:
        assert conn.is_primary
        conn.set_pipeline(ARTIFACTS, p4info=p4info)
        assert conn.write([("INSERT", e) for e in entities]) == len(entities)
        held = conn.read_all()
    assert len(entities) > 10
    assert Counter(held) == Counter(entities)


def refusal(sw: NetnsSwitch, tls: TlsConfig | None) -> str:
    with pytest.raises(P4RuntimeError) as refused:
        connect(sw, tls)
    return str(refused.value)


def test_client_without_certificate_is_refused(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    assert refusal(mtls_switch, TlsConfig(pki.ca)) == (
        f"leaf: {mtls_switch.grpc_address} closed the connection after the TLS handshake: it requires a client "
        "certificate (--tls-cert FILE --tls-key FILE, or cert and key under tls: in the topology)")


def test_client_certificate_of_another_ca_is_refused(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    assert refusal(mtls_switch, TlsConfig(pki.ca, pki.other_cert, pki.other_key)) == (
        f"leaf: {mtls_switch.grpc_address} refused our client certificate {pki.other_cert} (it closed the "
        "connection after the TLS handshake): is the certificate signed by a CA the switch trusts?")


def test_plaintext_client_is_refused(mtls_switch: NetnsSwitch) -> None:
    assert refusal(mtls_switch, None) == (
        f"leaf: {mtls_switch.grpc_address} speaks TLS and we connect in plaintext: give the CA that signed its "
        "certificate (--tls-ca FILE, or tls: in the topology)")


def test_switch_certificate_of_another_ca_is_not_trusted(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    message = refusal(mtls_switch, TlsConfig(pki.other_ca, pki.client_cert, pki.client_key))
    assert message.startswith(f"leaf: the TLS certificate of {mtls_switch.grpc_address} is not trusted: ")
    assert message.endswith(f"; is it signed by the CA in {pki.other_ca}?")


def test_switch_certificate_for_another_name_is_not_trusted(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    assert refusal(mtls_switch, good(pki, server_name="p0-t0-0.fabric")) == (
        f"leaf: the TLS certificate of {mtls_switch.grpc_address} is not trusted: Hostname mismatch, certificate "
        "is not valid for 'p0-t0-0.fabric'.; the certificate does not name 'p0-t0-0.fabric': set the name it "
        "holds with --tls-server-name (or server_name under tls:)")


def test_refused_clients_change_nothing(mtls_switch: NetnsSwitch, pki: Pki) -> None:
    """Refused clients (each would push an empty pipeline first) leave the tables as the good one wrote them."""
    p4info, entities = leaf_plan()
    with connect(mtls_switch, good(pki)) as conn:
        conn.set_pipeline(ARTIFACTS, p4info=p4info)
        conn.write([("INSERT", e) for e in entities])
    for bad in (None, TlsConfig(pki.ca), TlsConfig(pki.ca, pki.other_cert, pki.other_key)):
        conn = SwitchConnection("bad", mtls_switch.grpc_address, mtls_switch.device_id, election_id=20, tls=bad)
        with pytest.raises(P4RuntimeError):
            conn.connect()
            conn.set_pipeline(ARTIFACTS, p4info=p4info)
        conn.close()
    with connect(mtls_switch, good(pki)) as conn:
        conn.check_pipeline(p4info)
        assert Counter(conn.read_all()) == Counter(entities)


def test_tls_client_against_plaintext_switch_is_refused(pki: Pki) -> None:
    require_bmv2()
    with NetnsSwitch(f"tlp{os.getpid()}", ports=(1,)) as plain:
        assert refusal(plain, good(pki)) == (
            f"leaf: {plain.grpc_address} does not speak TLS (a plaintext P4Runtime server?): the TLS handshake "
            "failed: WRONG_VERSION_NUMBER")


def test_server_only_tls_takes_a_client_without_certificate(pki: Pki) -> None:
    """TLS without client authentication: the CA alone is enough."""
    require_bmv2()
    server = ServerTls(pki.server_cert, pki.server_key)
    with NetnsSwitch(f"tls1{os.getpid()}", ports=(1,), server_tls=server, client_tls=TlsConfig(pki.ca)) as sw:
        with connect(sw, TlsConfig(pki.ca)) as conn:
            conn.set_pipeline(ARTIFACTS)
            assert conn.get_pipeline_p4info() is not None
        assert refusal(sw, None).startswith(f"leaf: {sw.grpc_address} speaks TLS and we connect in plaintext")


# --- fabricctl on a fabric of TLS switches ---------------------------------------------------

@pytest.fixture(scope="module")
def tls_lab(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[FabricLab]:
    """1 plane x 2 T1 x 1 T0 x 2 hosts, every switch wanting mutual TLS; the topology's fabric-wide
    `tls:` names the CA, certificate and key relative to the topology file."""
    require_bmv2()
    workdir = tmp_path_factory.mktemp("tlsfabric")
    (workdir / "pki").symlink_to(pki.dir)
    tls = {"ca": f"pki/{pki.ca.name}", "cert": f"pki/{pki.client_cert.name}", "key": f"pki/{pki.client_key.name}"}
    yield from start_lab(workdir, topology.build(1, 2, 1, 2, name="tls_lab"), tag="tl", server_tls=mutual(pki),
                         tls=tls)


def ok_json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.stderr}{result.stdout}"
    return json.loads(result.stdout)


def test_fabricctl_install_fail_status_restore_over_mutual_tls(tls_lab: FabricLab, pki: Pki) -> None:
    here = tls_lab.path.parent / "pki"  # the topology's relative paths, resolved against its directory
    assert {s.tls for s in tls_lab.topo.switches} == {
        TlsConfig(here / pki.ca.name, here / pki.client_cert.name, here / pki.client_key.name)}
    tls_lab.state_path.unlink(missing_ok=True)

    done = ok_json(tls_lab.cli("install", "--json"))
    assert {n: (o["ok"], o["pipeline"]) for n, o in done["switches"].items()} == {
        n: (True, "pushed") for n in tls_lab.names}
    assert differences(tls_lab.snapshot(), tls_lab.desired()) == []

    failed = ok_json(tls_lab.cli("fail", "link", LEAF, SPINE, "--json"))
    assert failed["applied"] and sorted(failed["touched"]) == [LEAF, SPINE]
    assert differences(tls_lab.snapshot(), tls_lab.desired([LinkDown(LEAF, SPINE)])) == []

    status = ok_json(tls_lab.cli("status", "--json"))
    assert status["failures"] == [{"link": [LEAF, SPINE], "text": f"link {LEAF} -- {SPINE}", "by": "operator"}]
    assert {n: s["in_sync"] for n, s in status["switches"].items()} == {n: True for n in tls_lab.names}

    ok_json(tls_lab.cli("restore", "all", "--json"))
    assert differences(tls_lab.snapshot(), tls_lab.desired()) == []


def plain_copy(lab: FabricLab) -> Path:
    """The lab's topology file without its tls: mapping, beside it."""
    doc = yaml.safe_load(lab.path.read_text())
    del doc["tls"]
    path = lab.path.parent / "plain.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cli_on(lab: FabricLab, path: Path, *args: str):  # type: ignore[no-untyped-def]
    return FabricLab(lab.topo, path, lab.switches, lab.artifacts, lab.p4info).cli(*args)


def test_fabricctl_without_tls_settings_names_the_cause(tls_lab: FabricLab) -> None:
    before = tls_lab.snapshot()
    result = cli_on(tls_lab, plain_copy(tls_lab), "status", LEAF)
    assert result.exit_code == 1
    address = tls_lab.topo.switch(LEAF).grpc_addr
    assert result.stderr == (f"error: {LEAF}: {address} speaks TLS and we connect in plaintext: give the CA that "
                             "signed its certificate (--tls-ca FILE, or tls: in the topology)\n")
    assert tls_lab.snapshot() == before


def test_tls_options_win_over_the_topology(tls_lab: FabricLab, pki: Pki) -> None:
    # the options alone make a plaintext topology work ...
    plain = plain_copy(tls_lab)
    options = ["--tls-ca", str(pki.ca), "--tls-cert", str(pki.client_cert), "--tls-key", str(pki.client_key)]
    status = ok_json(cli_on(tls_lab, plain, *options, "status", "--json", LEAF, SPINE))
    assert set(status["switches"]) == {LEAF, SPINE} and all(s["in_sync"] for s in status["switches"].values())
    # ... and replace the topology's certificate where it has one
    result = tls_lab.cli("--tls-cert", str(pki.other_cert), "--tls-key", str(pki.other_key), "install", LEAF)
    assert result.exit_code == 1
    address = tls_lab.topo.switch(LEAF).grpc_addr
    assert result.stderr.splitlines()[0] == (
        f"error: {LEAF}: {address} refused our client certificate {pki.other_cert} (it closed the connection "
        "after the TLS handshake): is the certificate signed by a CA the switch trusts?")


def test_fabricctl_refuses_unusable_tls_files_before_contacting_a_switch(tls_lab: FabricLab, pki: Pki) -> None:
    before = tls_lab.snapshot()
    state = tls_lab.state_path.read_bytes() if tls_lab.state_path.exists() else None
    result = tls_lab.cli("--tls-cert", str(pki.client_cert), "--tls-key", str(pki.other_key), "fail", "link",
                         LEAF, SPINE)
    assert (result.exit_code, result.stderr) == (
        2, f"error: TLS key {pki.other_key} is not the key of certificate {pki.client_cert}\n")
    assert (tls_lab.state_path.read_bytes() if tls_lab.state_path.exists() else None) == state
    assert tls_lab.snapshot() == before


# --- TCP inside a namespace: the real fabricctl and p4runtime-shell ---------------------------

def test_fabricctl_and_shell_over_tcp_with_mutual_tls(tmp_path: Path, pki: Pki) -> None:
    """The switch on 127.0.0.1 (its certificate's IP SAN checked, no server-name override); fabricctl
    runs as its own process in the switch's namespace; `fabricctl shell` starts p4runtime-shell with
    --ssl --cacert --cert --private-key, and the shell reads the entries fabricctl installed."""
    require_bmv2()
    topo = topology.build(1, 1, 1, 1, name="tcp_tls", grpc_base_port=9559)  # p0-t1-0 :9559, p0-t0-0 :9560
    leaf = topo.switch(LEAF)
    doc = {"tls": {"ca": str(pki.ca), "cert": str(pki.client_cert), "key": str(pki.client_key)},
           **topology.to_dict(topo)}
    path = tmp_path / "tcp.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with NetnsSwitch(f"tlt{os.getpid()}", ports=(1, 2), device_id=leaf.device_id, grpc_addr=leaf.grpc_addr,
                     server_tls=mutual(pki)) as sw:
        def fabricctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
            return subprocess.run(["ip", "netns", "exec", sw.ns, sys.executable, "-m", "fabricctl",
                                   "--topology", str(path), *args], cwd=REPO_ROOT, input=stdin,
                                  capture_output=True, text=True, timeout=120)

        installed = fabricctl("install", LEAF, "--json")
        assert installed.returncode == 0, installed.stderr
        assert json.loads(installed.stdout)["switches"][LEAF]["pipeline"] == "pushed"
        status = fabricctl("status", LEAF, "--json")
        assert json.loads(status.stdout)["switches"][LEAF]["in_sync"] is True

        untrusted = fabricctl("--tls-ca", str(pki.other_ca), "status", LEAF)  # gRPC's own handshake log muted
        assert untrusted.returncode == 1 and len(untrusted.stderr.splitlines()) == 1, untrusted.stderr
        assert untrusted.stderr.startswith(f"error: {LEAF}: the TLS certificate of {leaf.grpc_addr} is not trusted: ")
        assert untrusted.stderr.endswith(f"; is it signed by the CA in {pki.other_ca}?\n")

        command = fabricctl("shell", LEAF, "--print-command")
        assert command.stdout.split()[-7:] == ["--ssl", "--cacert", str(pki.ca), "--cert", str(pki.client_cert),
                                               "--private-key", str(pki.client_key)]
        routes = "IngressPipe.routing.routes_v6"
        want = sum(1 for e in encoding.encode(make_plan(planning.fabric(topo, "srv6_spray")), [LEAF],
                                         P4Info.load(ARTIFACTS.p4info), "").desired[LEAF]
                   if getattr(e, "table", None) == routes)
        shell = fabricctl("shell", LEAF, stdin=f"print('ROUTES', len(list(TableEntry('{routes}').read())))\n")
        assert shell.returncode == 0, shell.stderr
        assert f"ROUTES {want}" in shell.stdout and want > 0
