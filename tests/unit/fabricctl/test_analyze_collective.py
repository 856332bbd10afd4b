"""fabricctl analyze collective: the table, JSON, PNG, one-line errors with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.workload import Rates, Workload, grid, ideal_time
from fabricctl.main import cli
from tests.paths import UNIT_DATA

LAB = UNIT_DATA / "two_plane_lab.yaml"


def run(*args: str) -> Result:
    return CliRunner(env={"FABRIC_TOPOLOGY": None}).invoke(cli, list(args), prog_name="fabricctl")


def test_json_on_the_lab_topology() -> None:
    r = run("--topology", str(LAB), "analyze", "collective", "--size", "1M", "--qps", "2", "--strategy", "split",
            "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert (doc["design"], doc["ranks"], doc["collective"], doc["qps"], doc["strategy"]) == \
        ("2x2x2x2", 4, "allreduce", 2, "split")
    want = ideal_time(Workload("allreduce", 1 << 20), grid(2, 2, 2, "packed", 4), 2, Rates(100e9, 100e9))
    assert doc["ideal_s"] == pytest.approx(want)
    by = {s["scheme"]: s for s in doc["schemes"]}
    assert list(by) == ["ecmp", "eecmp", "pin", "leaf_spray", "host_spray", "ethereal"]
    # packed ring on 2 leaves: one flow crosses each way a step; a perfect split reaches the ideal
    assert by["host_spray"]["slowdown"] == pytest.approx(1.0) and by["leaf_spray"]["slowdown"] == pytest.approx(1.0)
    assert by["host_spray"]["busbw_GBps"] == pytest.approx((1 << 20) / want * 1.5 / 1e9)


def test_table_and_failure_draws(tmp_path: Path) -> None:
    png = tmp_path / "c.png"
    r = run("analyze", "collective", "--design", "1x4x4x2", "--placement", "spread", "--schemes", "pin,host_spray",
            "--failures", "1", "--draws", "5", "--png", str(png))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].startswith("ring AllReduce of 67,108,864 B over 8 ranks (spread) on 1x4x4x2")
    assert "1 link failures x 5:" in lines[2]
    assert [line.split()[0] for line in lines[3:5]] == ["path", "host"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {png}" in r.output


def test_draws_are_seeded() -> None:
    args = ("analyze", "collective", "--design", "2x4x4x2", "--failures", "3", "--draws", "8", "--json")
    def figures(doc: dict) -> dict:  # type: ignore[type-arg]
        doc.pop("peak_rss_mb")
        for s in doc["schemes"]:
            s.pop("compute_s")
        return doc

    first = figures(json.loads(run(*args).output))
    assert first == figures(json.loads(run(*args).output))
    assert first["schemes"][0]["failures"]["draws"] == 8 and first["failures"]["seed"] == 1


def test_help_teaches_the_schemes() -> None:
    r = run("analyze", "collective", "--help")
    assert r.exit_code == 0
    for word in ("ecmp", "eecmp", "leaf_spray", "host_spray", "ethereal", "nccl-tests", "8x256x512x256"):
        assert word in r.output
    assert "collective" in run("analyze", "--help").output


@pytest.mark.parametrize("args,message", [
    (["--design", "1x2x2x2", "--size", "1Q"], "error: size '1Q' is not a byte count like 4096, 256K, 1M or 1G"),
    (["--design", "1x2x2x2", "--schemes", "ecmp,magic"], "error: --schemes 'ecmp,magic': give some of ecmp,"),
    (["--design", "1x4x4x2", "--collective", "allreduce_hd", "--ranks", "6"],
     "error: halving-doubling AllReduce needs a power-of-two number of ranks, got 6"),
    (["--design", "1x2x2x2", "--placement", "h0,h7"], "error: placement host 'h7' is not h0..h3"),
    (["--design", "1x2x2x2", "--ranks", "9"], "error: placement packed has room for 4 ranks on this fabric"),
    (["--design", "1x2x2x2", "--failures", "5"], "error: --failures 5 is more than the 4 leaf-spine links"),
    (["--design", "1x2x2x2", "--link-rate", "fast"], "error: --link-rate 'fast' is not a rate in Gb/s"),
    (["--design", "1x2x2x2", "--png", "x.svg"], "error: plot file x.svg must end in .png"),
    ([], "error: no design: give --design"),
    (["--design", "1x2x512x256", "--collective", "alltoall", "--ranks", "4096", "--qps", "2", "--strategy", "split"],
     "error: one step of this job is 33,546,240 QP parts, more than the 20,000,000"),
])
def test_bad_input_is_one_error_line(args: list[str], message: str, tmp_path: Path) -> None:
    png = tmp_path / "keep.png"
    png.write_bytes(b"keep")
    r = run("analyze", "collective", *args, *([] if "--png" in args else ["--png", str(png)]))
    assert r.exit_code == 2, r.output
    assert r.output.startswith(message) and r.output.count("\n") == 1, r.output
    assert png.read_bytes() == b"keep"


def test_the_lab_runs_port_rule_and_hash_key() -> None:
    base = ["analyze", "collective", "--design", "2x2x2x4", "--size", "128K", "--placement", "h0,h4,h1,h5", "--qps",
            "8", "--strategy", "split", "--schemes", "ecmp,eecmp", "--json"]
    r = run(*base, "--sport-rule", "ev")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert (doc["sport"], doc["hash"]) == ("per plane (the lab's leaf EV)", "crc32 (bmv2)")
    assert {s["scheme"]: s["slowdown"] for s in doc["schemes"]} == pytest.approx({"ecmp": 2.0, "eecmp": 1.0})
    keyed = [json.loads(run(*base, "--sport-rule", "qp-crc", "--hash-key", k).output) for k in ("3", "3", "4")]
    assert keyed[0]["hash"] == "random, key 3" and keyed[0]["sport"] == "per QP (crc32, the lab's kernel)"
    assert keyed[0]["schemes"] == [dict(s, compute_s=keyed[0]["schemes"][i]["compute_s"])
                                   for i, s in enumerate(keyed[1]["schemes"])]  # one key, one answer
    table = run(*base[:-1], "--sport-rule", "ev", "--hash-key", "3")
    assert "UDP source port per plane (the lab's leaf EV); ECMP hash random, key 3" in table.output


def test_a_port_rule_with_a_fixed_port_is_one_error_line() -> None:
    r = run("analyze", "collective", "--design", "2x2x2x4", "--sport", "49152", "--sport-rule", "qp-crc")
    assert r.exit_code == 2, r.output
    assert r.output == "error: a fixed UDP source port (49152) and the port rule 'qp-crc' exclude each other\n"


@pytest.mark.parametrize("link, message", [
    ("0,2,0", "error: dead link plane 0, leaf 2, spine 0 is not a leaf-spine link of 2x2x2x4 (planes 0..1, leaves "
              "0..1, spines 0..1)\n"),
    ("0,2", "error: --dead-link '0,2': give PLANE,LEAF,SPINE, e.g. 0,0,0\n"),
])
def test_a_bad_dead_link_is_one_error_line(link: str, message: str) -> None:
    r = run("analyze", "collective", "--design", "2x2x2x4", "--dead-link", link)
    assert r.exit_code == 2 and r.output == message, r.output


def test_a_dead_link_is_in_the_table_and_json() -> None:
    args = ["analyze", "collective", "--design", "2x2x2x4", "--collective", "alltoall", "--size", "128K",
            "--placement", "spread", "--ranks", "4", "--qps", "2", "--strategy", "split", "--schemes", "leaf_spray",
            "--dead-link", "0,0,0"]
    assert "dead from the start (plane, leaf, spine): 0,0,0" in run(*args).output
    doc = json.loads(run(*args, "--json").output)
    assert doc["dead_links"] == [[0, 0, 0]] and doc["schemes"][0]["slowdown"] == pytest.approx(4 / 3)
