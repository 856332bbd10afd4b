"""fabricctl analyze and topo draw: output, JSON, plots, drawings, one-line errors, files untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.analysis import closed
from controller.analysis import montecarlo as mc
from controller.analysis.design import Design, Rates, from_topology
from fabricctl.main import cli
from controller.state.statefile import save_state
from controller.model.failures import LinkDown, SwitchDown
from controller.model.topology import build
from tests.paths import UNIT_DATA

LAB = UNIT_DATA / "two_plane_lab.yaml"
FAST = ["--samples", "60", "--repair-events", "2000", "--failures", "1,2,4"]


def run(*args: str) -> Result:
    return CliRunner(env={"FABRIC_TOPOLOGY": None}).invoke(cli, list(args), prog_name="fabricctl")


def test_json_has_the_closed_forms_and_the_monte_carlo() -> None:
    r = run("analyze", "--design", "2x2x4x2", "--gpus", "4", *FAST, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    (a,) = doc["designs"]
    d = Design(2, 2, 4, 2)
    assert a["design"]["spec"] == "2x2x4x2" and a["design"]["gpus"] == 8 and a["job"]["gpus"] == 4
    assert a["worst_case"]["nic"] == {"cut_by": 2, "endured": 1}
    assert a["worst_case"]["t1"] == {"cut_by": 4, "endured": 3}
    q = closed.unavailabilities(Rates())
    assert a["pair"]["p_cut_every_plane"] == closed.pair_cut(d, q)
    assert a["pair"]["hosts"] == ["h0", "h6"]
    assert a["job"]["with_repair"]["interruptions_per_hour"] == closed.job_interruption_rate(d, 4, Rates())
    assert [e["samples"] for e in a["curve"]["p_job_cut"]] == [60, 60, 60]
    assert a["any_pair"]["mc_failures_to_cut"]["samples"] == 60 and a["any_pair"]["mc_skipped"] is None
    # seeded: the same command gives the same numbers
    assert json.loads(run("analyze", "--design", "2x2x4x2", "--gpus", "4", *FAST, "--json").output) == doc


def test_compare_table_puts_designs_side_by_side(tmp_path: Path) -> None:
    png = tmp_path / "cmp.png"
    r = run("analyze", "--design", "single=1x2x8x2", "--compare", "multi=4x2x8x2", "--gpus", "8", *FAST,
            "--plot", str(png))
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert lines[0].split() == ["single", "multi"]
    endured = next(line for line in lines if line.startswith("endured with certainty: NIC ports"))
    assert endured.split()[-2:] == ["0", "3"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot: {png}" in r.output


def test_design_from_the_topology_file() -> None:
    r = run("--topology", str(LAB), "analyze", *FAST, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["designs"][0]["design"]["spec"] == "2x2x2x2"


@pytest.mark.parametrize("args,message", [
    (["--design", "2x2x4"], "error: design '2x2x4' is not PLANESxT1xT0xHOSTS_PER_T0"),
    (["--design", "0x2x4x2"], "error: planes must be between 1 and 64, got 0"),
    (["--design", "64x4096x4096x1024"], "hosts is more than the 1048576 this analysis takes"),
    (["--design", "2x2x4x2", "--gpus", "9"], "error: --gpus 9 does not fit design 2x2x4x2: between 2 and its 8 hosts"),
    (["--design", "2x2x4x2", "--failures", "1,x"], "error: --failures '1,x' is not a comma-separated list"),
    (["--design", "2x2x4x2", "--kind", "t1", "--failures", "5"], "error: --failures 5 is more than the 4 T1 switches of design 2x2x4x2"),
    (["--design", "2x2x4x2", "--nic", "fast"], "error: rate 'fast' is neither an MTBF in hours"),
    (["--design", "2x2x4x2", "--link", "-5h"], "error: MTBF '-5h' must be above 0 hours"),
    (["--design", "a=2x2x4x2", "--design", "a=1x2x4x2"], "error: two designs share a name"),
    (["--design", "2x64x256x4", "--engine", "controller"], "error: --engine controller builds the controller's fabric"),
    ([], "error: no design: give --design"),
])
def test_bad_input_is_one_error_line(args: list[str], message: str, tmp_path: Path) -> None:
    png = tmp_path / "p.png"
    png.write_bytes(b"keep")
    r = run("analyze", *args, "--plot", str(png))
    assert r.exit_code == 2
    assert len(r.output.strip().splitlines()) == 1 and message in r.output, r.output
    assert png.read_bytes() == b"keep"


def test_bad_plot_path_is_refused_before_any_work(tmp_path: Path) -> None:
    r = run("analyze", "--design", "1x2x2x2", "--samples", "1000000", "--plot", "out.jpg")
    assert r.exit_code == 2 and r.output.strip() == "error: plot file out.jpg must end in .png"
    r = run("analyze", "--design", "1x2x2x2", "--samples", "1000000", "--plot", str(tmp_path / "no" / "p.png"))
    assert r.exit_code == 2 and r.output.strip() == f"error: cannot write {tmp_path / 'no' / 'p.png'}: no directory {tmp_path / 'no'}"


def test_controller_engine_gives_the_fast_engines_numbers() -> None:
    d = Design(2, 2, 3, 2)
    ks = [1, 2, 3, 5]
    fast = mc.p_cut_after(d, range(5), ks, 150, seed=2)
    ctrl = mc.p_cut_after(d, range(5), ks, 150, seed=2, cut=mc.controller_cut(d))
    assert fast == ctrl and any(e.value > 0 for e in fast)


def test_topo_draw_marks_the_state_files_failures(tmp_path: Path) -> None:
    topo = tmp_path / "lab.yaml"
    shutil.copy(LAB, topo)
    save_state(tmp_path / ".fabric-state.json", [LinkDown("p0-t0-0", "p0-t1-1"), SwitchDown("p1-t1-0")])
    svg = tmp_path / "f.svg"
    r = run("--topology", str(topo), "topo", "draw", "--out", str(svg))
    assert r.exit_code == 0, r.output
    assert r.output.strip() == f"drew two_plane_lab: 8 switches, 2 failures marked -> {svg}"
    text = svg.read_text()
    assert text.count("#d62728") >= 3 and "2 failures (red)" in text
    r = run("--topology", str(topo), "topo", "draw", "--healthy", "--out", str(tmp_path / "h.png"))
    assert r.exit_code == 0 and "0 failures marked" in r.output
    assert (tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"


def test_topo_draw_refuses_what_it_cannot_draw(tmp_path: Path) -> None:
    r = run("--topology", str(LAB), "topo", "draw", "--out", str(tmp_path / "x.jpg"))
    assert r.exit_code == 2 and r.output.strip().startswith("error: cannot draw to") and not (tmp_path / "x.jpg").exists()


def test_irregular_topology_is_refused() -> None:
    topo = build(2, 2, 2, 2)
    assert from_topology(topo) == Design(2, 2, 2, 2, name="fabric")
    from controller.model.topology import Topology

    uneven = Topology(name="uneven", planes=2, switches=tuple(s for s in topo.switches if s.name != "p1-t1-1"))
    with pytest.raises(ValueError, match="not a regular design \\(its planes differ in size\\)"):
        from_topology(uneven)
