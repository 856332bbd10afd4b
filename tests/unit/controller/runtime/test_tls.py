"""TLS settings without a switch: the topology's fabric-wide and per-switch `tls:`, the --tls-* options
over them, every unusable file refused in one line before anything is written, shell's flags."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from controller import topofile
from controller.runtime import tls
from controller.model import topology
from fabricctl.main import cli
from controller.model.tlsconfig import TlsConfig
from tests.paths import UNIT_DATA
from tests.require import need
from controller.model.tlsconfig import TlsError, override, resolve

DATA = UNIT_DATA
LAB = DATA / "two_plane_lab.yaml"
LEAF, OTHER = "p0-t0-0", "p0-t0-1"


def run(*args: str, env: dict[str, str | None] | None = None) -> Result:
    runner = CliRunner(env={"FABRIC_TOPOLOGY": None, **{k: None for k in (
        "FABRIC_TLS_CA", "FABRIC_TLS_CERT", "FABRIC_TLS_KEY", "FABRIC_TLS_SERVER_NAME")}, **(env or {})})
    return runner.invoke(cli, list(args), prog_name="fabricctl")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from mininet_labs import pki as labpki

    need("openssl", labpki.openssl() is not None, "openssl not found on PATH (these tests make certificates with it)")
    return labpki.make_pki(tmp_path_factory.mktemp("pki"))


def with_tls(tmp_path: Path, fabric: object = None, **per_switch: object) -> Path:
    """The two-plane lab in tmp_path with this top-level `tls:` and per-switch ones (by switch name)."""
    doc = yaml.safe_load(LAB.read_text())
    if fabric is not None:
        doc["tls"] = fabric
    for rec in doc["switches"]:
        if rec["name"] in per_switch:
            rec["tls"] = per_switch[rec["name"]]
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def one_error(result: Result, code: int) -> str:
    """The single `error:` line of a failed command (asserting that is all there is)."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0][len("error: "):]


# --- where the settings come from ------------------------------------------------------------

def test_fabric_wide_and_per_switch_settings_with_paths_relative_to_the_topology(
        tmp_path: Path, pki, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "certs").mkdir()
    for f in (pki.ca, pki.client_cert, pki.client_key):
        (tmp_path / "certs" / f.name).write_bytes(f.read_bytes())
    path = with_tls(tmp_path, {"ca": "certs/fabric-ca.crt", "cert": "certs/fabricctl.crt", "key": "certs/fabricctl.key"},
                    **{LEAF: {"server_name": "leaf0.fabric"}, OTHER: False, "p1-t0-0": {"ca": str(pki.ca)}})
    fabric = TlsConfig(tmp_path / "certs/fabric-ca.crt", tmp_path / "certs/fabricctl.crt",
                       tmp_path / "certs/fabricctl.key")
    monkeypatch.chdir("/")  # resolved against the file's directory, not the working directory
    topo = topology.load(path)
    got = {s.name: s.tls for s in topo.switches}
    assert got[LEAF] == TlsConfig(fabric.ca, fabric.cert, fabric.key, "leaf0.fabric")
    assert got[OTHER] is None
    assert got["p1-t0-0"] == TlsConfig(pki.ca, fabric.cert, fabric.key)
    assert {got[n] for n in got if n not in (LEAF, OTHER, "p1-t0-0")} == {fabric}
    assert topofile.check_topology(path)[0] == topo
    # the document form names every switch's own setting, absolute, and reads back the same
    assert {s.name: s.tls for s in topology.from_dict(topology.to_dict(topo)).switches} == got
    assert run("--topology", str(path), "topo", "validate").exit_code == 0


def test_without_tls_everything_is_plaintext() -> None:
    assert {s.tls for s in topology.load(LAB).switches} == {None}


def test_tls_true_is_tls_with_the_system_roots(tmp_path: Path) -> None:
    topo = topology.load(with_tls(tmp_path, True, **{LEAF: False}))
    assert {s.name: s.tls for s in topo.switches if s.name in (LEAF, OTHER)} == {LEAF: None, OTHER: TlsConfig()}


@pytest.mark.parametrize("fabric, per_switch, problem", [
    ({"ca": "ca.pem", "cert": "c.pem"}, {}, "topology: tls cert and key go together (the client certificate and its key)"),
    (None, {LEAF: {"key": "k.pem"}}, f"switch {LEAF}: tls cert and key go together (the client certificate and its key)"),
    ({"ca": "ca.pem", "certificate": "c.pem"}, {}, "topology: unknown tls key 'certificate' (known: ca, cert, key, server_name)"),
    (None, {LEAF: {"ca": 7}}, f"switch {LEAF}: tls ca must be a non-empty string, got 7"),
    (None, {LEAF: "ca.pem"}, f"switch {LEAF}: tls must be a mapping of ca, cert, key, server_name (or true/false), got str"),
    ({"ca": ""}, {}, "topology: tls ca must be a non-empty string, got ''"),
])
def test_malformed_tls_settings_are_topology_problems(tmp_path: Path, fabric: object, per_switch: dict,
                                                       problem: str) -> None:
    path = with_tls(tmp_path, fabric, **per_switch)
    result = run("--topology", str(path), "topo", "validate")
    assert (result.exit_code, result.stderr) == (3, f"error: {path}: {problem}\n")
    assert one_error(run("--topology", str(path), "plan"), 3).startswith(f"topology {path} is invalid: {problem}")


def test_resolve_and_override_field_by_field() -> None:
    a, b = TlsConfig(Path("/a/ca"), Path("/a/c"), Path("/a/k")), TlsConfig(Path("/b/ca"))
    assert override(a, b) == TlsConfig(Path("/b/ca"), Path("/a/c"), Path("/a/k"))
    assert override(b, a) == a
    assert override(None, b) == b and override(a, None) == a
    assert resolve(a, False) is None and resolve(a, None) == a and resolve(None, True) == TlsConfig()
    with pytest.raises(TlsError, match="a TLS client certificate needs its key too"):
        TlsConfig(cert=Path("/c"))


# --- the options -----------------------------------------------------------------------------

def test_options_win_over_the_topology_and_come_from_the_environment(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    path = with_tls(tmp_path, {"ca": str(pki.ca)}, **{OTHER: False})
    shown = run("--topology", str(path), "--tls-cert", str(pki.client_cert), "--tls-key", str(pki.client_key),
                "--tls-server-name", "fabric.test", "topo", "show", "--json")
    assert shown.exit_code == 0, shown.stderr
    want = {"ca": str(pki.ca), "cert": str(pki.client_cert), "key": str(pki.client_key), "server_name": "fabric.test"}
    by_name = {s["name"]: s.get("tls") for s in json.loads(shown.stdout)["switches"]}
    assert by_name[LEAF] == want
    assert by_name[OTHER] == {k: v for k, v in want.items() if k != "ca"}  # options apply to every switch
    env = run("--topology", str(LAB), "topo", "show", "--json",
              env={"FABRIC_TLS_CA": str(pki.ca), "FABRIC_TLS_CERT": str(pki.client_cert),
                   "FABRIC_TLS_KEY": str(pki.client_key)})
    assert {json.dumps(s["tls"]) for s in json.loads(env.stdout)["switches"]} == {
        json.dumps({"ca": str(pki.ca), "cert": str(pki.client_cert), "key": str(pki.client_key)})}


def test_cert_option_without_key_is_a_usage_error() -> None:
    assert one_error(run("--topology", str(LAB), "--tls-cert", "c.pem", "plan"), 2) == (
        "--tls-cert and --tls-key go together (the client certificate and its key) (see 'fabricctl --help')")


# --- unusable files: one line, exit 2, nothing written ---------------------------------------

def bad_files(tmp_path: Path, pki) -> list[tuple[dict[str, str], str]]:  # type: ignore[no-untyped-def]
    big = tmp_path / "big.pem"
    big.write_bytes(b"-----BEGIN CERTIFICATE-----\n" + b"A" * (2 << 20))
    fifo = tmp_path / "fifo.pem"
    os.mkfifo(fifo)
    text = tmp_path / "notes.txt"
    text.write_text("not a certificate\n")
    encrypted = tmp_path / "enc.key"
    subprocess.run(["openssl", "pkey", "-in", str(pki.client_key), "-aes256", "-passout", "pass:x",
                    "-out", str(encrypted)], check=True, capture_output=True)
    return [
        ({"ca": str(tmp_path / "absent.pem")}, f"cannot read TLS CA certificate {tmp_path / 'absent.pem'}: {os.strerror(errno.ENOENT)}"),
        ({"ca": str(fifo)}, f"TLS CA certificate {fifo} is not a regular file"),
        ({"ca": "/dev/zero"}, "TLS CA certificate /dev/zero is not a regular file"),
        ({"ca": str(tmp_path)}, f"TLS CA certificate {tmp_path} is not a regular file"),
        ({"ca": str(big)}, f"TLS CA certificate {big} is {big.stat().st_size} bytes, more than a PEM file of 1048576 bytes"),
        ({"ca": str(text)}, f"TLS CA certificate {text} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ({"ca": str(pki.client_key)}, f"TLS CA certificate {pki.client_key} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ({"cert": str(pki.client_cert), "key": str(text)}, f"TLS key {text} holds no PEM private key (-----BEGIN ... PRIVATE KEY-----)"),
        ({"cert": str(pki.client_cert), "key": str(pki.server_key)},
         f"TLS key {pki.server_key} is not the key of certificate {pki.client_cert}"),
        ({"cert": str(pki.client_cert), "key": str(encrypted)},
         f"TLS key {encrypted} is encrypted: gRPC needs it unencrypted (openssl pkey -in {encrypted} -out plain.key)"),
    ]


def test_unusable_files_in_the_topology_are_one_line_before_anything_is_written(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    for n, (settings, message) in enumerate(bad_files(tmp_path, pki)):
        d = tmp_path / str(n)
        d.mkdir()
        path = with_tls(d, None, **{LEAF: settings})
        for args in (("topo", "validate"), ("topo", "validate", "--json"), ("fail", "link", LEAF, "p0-t1-1"),
                     ("install",), ("status",)):
            assert one_error(run("--topology", str(path), *args), 2) == message, args
        assert sorted(p.name for p in d.iterdir()) == ["lab.yaml"]  # no state file written


def test_unusable_files_given_as_options(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    assert one_error(run("--topology", str(LAB), "--tls-ca", "/dev/zero", "status"), 2) == (
        "TLS CA certificate /dev/zero is not a regular file")
    assert one_error(run("--topology", str(LAB), "--tls-cert", str(pki.ca), "--tls-key", str(pki.client_key),
                         "install"), 2) == f"TLS key {pki.client_key} is not the key of certificate {pki.ca}"


def test_load_gives_the_pem_bytes(pki) -> None:  # type: ignore[no-untyped-def]
    m = tls.load(TlsConfig(pki.ca, pki.client_cert, pki.client_key))
    assert (m.root_certificates, m.certificate_chain, m.private_key) == (
        pki.ca.read_bytes(), pki.client_cert.read_bytes(), pki.client_key.read_bytes())


# --- shell -----------------------------------------------------------------------------------

def test_shell_passes_the_tls_settings_to_p4runtime_shell(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    path = with_tls(tmp_path, {"ca": str(pki.ca), "cert": str(pki.client_cert), "key": str(pki.client_key)},
                    **{OTHER: False})
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "FABRIC_SHELL_PYTHON": None}  # its venv, not made
    result = run("--topology", str(path), "shell", LEAF, "--print-command", env=cache)
    assert result.stdout.split() == [str(tmp_path / "cache/srv6-fabric/shell-venv/bin/python"), "-m", "p4runtime_sh",
                                     "--grpc-addr", "127.0.0.1:50003",
                                     "--device-id", "3", "--election-id", "0,1", "--ssl", "--cacert", str(pki.ca),
                                     "--cert", str(pki.client_cert), "--private-key", str(pki.client_key)]
    plain = run("--topology", str(path), "shell", OTHER, "--print-command", env=cache)
    assert "--ssl" not in plain.stdout.split()
    only_ca = run("--topology", str(LAB), "--tls-ca", str(pki.ca), "shell", LEAF, "--print-command", env=cache)
    assert only_ca.stdout.split()[-3:] == ["--ssl", "--cacert", str(pki.ca)]


def test_shell_refuses_what_p4runtime_shell_cannot_do(tmp_path: Path, pki, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    path = with_tls(tmp_path, {"ca": str(pki.ca)}, **{LEAF: {"server_name": "leaf0.fabric"}})
    assert one_error(run("--topology", str(path), "shell", LEAF, "--print-command"), 2) == (
        f"{LEAF}: p4runtime-shell has no option for the TLS server name 'leaf0.fabric'; give the switch a "
        "host:port address its certificate names")
    doc = yaml.safe_load(path.read_text())
    assert doc["switches"][3]["name"] == OTHER
    doc["switches"][3]["grpc"] = f"unix:{tmp_path}/leaf.sock"
    path.write_text(yaml.safe_dump(doc))
    assert one_error(run("--topology", str(path), "shell", OTHER, "--print-command"), 2) == (
        f"{OTHER}: p4runtime-shell has no option for the TLS server name 'localhost' that a unix: address needs "
        "(gRPC would check the socket path); give the switch a host:port address its certificate names")
    # a p4runtime-shell older than 0.0.6 (its p4runtime module has no SSLOptions), where FABRIC_SHELL_PYTHON runs
    old = tmp_path / "old-shell" / "p4runtime_sh"
    old.mkdir(parents=True)
    (old / "__init__.py").write_text("")
    (old / "p4runtime.py").write_text("class P4RuntimeClient:\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(old.parent))
    assert one_error(run("--topology", str(path), "shell", "p1-t0-0", "--print-command",
                         env={"FABRIC_SHELL_PYTHON": sys.executable}), 2) == (
        "p1-t0-0: this p4runtime-shell has no TLS options (--ssl, --cacert, --cert, --private-key: "
        "p4runtime-shell 0.0.6 and later); upgrade it")


def test_tls_options_after_the_subcommand_and_in_a_config_file(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    def tls_of(result: Result) -> set[str]:
        assert result.exit_code == 0, result.stderr
        return {json.dumps(s.get("tls")) for s in json.loads(result.stdout)["switches"]}

    assert tls_of(run("--topology", str(LAB), "topo", "show", "--json", "--tls-ca", str(pki.ca))) == {
        json.dumps({"ca": str(pki.ca)})}
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_bytes(pki.ca.read_bytes())
    config = tmp_path / "fabric.yaml"
    config.write_text("tls_ca: certs/ca.crt\ntls-server-name: fabric.test\n")  # relative to the config file
    assert tls_of(run("--config", str(config), "--topology", str(LAB), "topo", "show", "--json")) == {
        json.dumps({"ca": str(tmp_path / "certs" / "ca.crt"), "server_name": "fabric.test"})}
