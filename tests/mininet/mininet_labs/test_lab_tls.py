"""A lab whose switches want mutual TLS on P4Runtime (`fabricctl lab up --tls`): the plan installed over
TLS carries RoCEv2, and fabricctl on the lab's topology fails, reconciles and checks through TLS;
without the lab's certificates a client is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from controller.model.tlsconfig import TlsConfig
from controller.programs.toolchain import REPO_ROOT
from tests.mininet.conftest import free_port_base, lab_missing

LEAF, SPINE = "p0-t0-0", "p0-t1-1"


@pytest.fixture(scope="module")
def tls_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """1 plane x 2 T1 x 2 T0 x 1 host, headless, switches with mutual TLS."""
    why = lab_missing()
    if why:
        pytest.skip(why)
    from mininet_labs.headless import start_headless
    from mininet_labs.lab import cleanup
    from mininet_labs.labstate import default_topology
    from mininet_labs.pki import openssl

    if openssl() is None:
        pytest.skip("openssl not found on PATH (lab up --tls makes its certificates with it)")
    lab_dir = tmp_path_factory.mktemp("tlslab")
    model = default_topology(1, 2, 2, 1, grpc_base_port=free_port_base(4))
    try:
        yield start_headless(model, lab_dir, tag=f"s{os.getpid() % 100}", tls=True)
    finally:
        cleanup(lab_dir)


def fabricctl(topology: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fabricctl", "--topology", str(topology), *args],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_lab_topology_names_the_lab_certificates(tls_lab) -> None:  # type: ignore[no-untyped-def]
    d = tls_lab.dir / "tls"
    want = TlsConfig(d / "fabric-ca.crt", d / "fabricctl.crt", d / "fabricctl.key")
    assert {s.tls for s in tls_lab.model.switches} == {want}
    doc = yaml.safe_load(tls_lab.topology_path.read_text())
    assert {json.dumps(s["tls"], sort_keys=True) for s in doc["switches"]} == {
        json.dumps({"ca": str(want.ca), "cert": str(want.cert), "key": str(want.key)}, sort_keys=True)}
    out = (tls_lab.dir / f"{LEAF}.out").read_text().splitlines()[0]
    assert out.endswith(f"--grpc-server-ssl --grpc-server-cert {d / 'switch.crt'} --grpc-server-key "
                        f"{d / 'switch.key'} --grpc-server-cacert {want.ca} --grpc-server-with-client-auth")


def test_plan_installed_over_tls_carries_roce(tls_lab) -> None:  # type: ignore[no-untyped-def]
    report = tls_lab.traffic(qps=2, messages=8)
    assert report.problems() == []
    assert report.totals()["received"] == report.totals()["sent"] > 0


def test_fabricctl_fail_status_restore_on_the_tls_lab(tls_lab) -> None:  # type: ignore[no-untyped-def]
    path = tls_lab.topology_path
    failed = fabricctl(path, "fail", "link", LEAF, SPINE, "--json")
    assert failed.returncode == 0, failed.stderr
    assert json.loads(failed.stdout)["applied"] is True
    status = fabricctl(path, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert {n: s["in_sync"] for n, s in json.loads(status.stdout)["switches"].items()} == {
        s.name: True for s in tls_lab.model.switches}
    restored = fabricctl(path, "restore", "all", "--json")
    assert restored.returncode == 0, restored.stderr


def test_a_client_without_the_lab_certificates_is_refused(tls_lab, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(tls_lab.topology_path.read_text())
    for rec in doc["switches"]:
        del rec["tls"]
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = fabricctl(plain, "status", LEAF)
    address = tls_lab.model.switch(LEAF).grpc_addr
    assert result.returncode == 1
    assert result.stderr == (f"error: {LEAF}: {address} speaks TLS and we connect in plaintext: give the CA "
                             "that signed its certificate (--tls-ca FILE, or tls: in the topology)\n")
