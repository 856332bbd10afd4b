"""Streamed plan export (one switch in memory at a time), atomic files, YAML through the C loader."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from controller.model import topology, yamlload
from controller.files.atomic import open_atomic
from controller.failover import with_failures
from controller.model.failures import LinkDown, SwitchDown
from controller.plan.fabricplan import FORMAT, Plan, entity_to_json, plan
from controller.routes import Fabric, Options
from controller.plan.p4names import EECMP
from controller.model.topology import build, load, to_dict
from tests.require import needs

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("indent", [None, 1, 2])
@pytest.mark.parametrize("program", ["srv6_spray", EECMP])
def test_streamed_json_is_what_json_dumps_gives_and_reads_back(indent: int | None, program: str) -> None:
    f = with_failures(Fabric(build(2, 3, 4, 2), options=Options(program=program)),  # type: ignore[arg-type]
                      [LinkDown("p0-t0-1", "p0-t1-2"), SwitchDown("p1-t0-3")])
    p = plan(f)
    out = io.StringIO()
    p.write_json(out, indent)
    whole = {"format": FORMAT, "switches": {n: [entity_to_json(e) for e in p[n]] for n in p}}
    assert out.getvalue() == json.dumps(whole, indent=indent) == p.to_json(indent)
    again = Plan.from_json(out.getvalue())
    assert again == p and list(again) == list(p)


def test_only_restricts_a_lazy_plan_and_an_empty_plan_is_valid_json() -> None:
    p = plan(Fabric(build(1, 2, 3, 1)))
    part = p.only(["p0-t1-1", "p0-t0-2"])
    assert list(part) == ["p0-t1-1", "p0-t0-2"] and part.fabric is p.fabric
    assert Plan.from_json(part.to_json(1)) == Plan(held={"p0-t1-1": p["p0-t1-1"], "p0-t0-2": p["p0-t0-2"]})
    assert part.counts() == {n: p.counts()[n] for n in part}
    assert json.loads(Plan(held={}).to_json(1)) == {"format": FORMAT, "switches": {}}


def test_open_atomic_replaces_only_when_the_block_succeeds(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old\n")
    with pytest.raises(RuntimeError, match="switch failed"):
        with open_atomic(target) as fh:
            fh.write("half of a plan")
            raise RuntimeError("switch failed")
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target]
    with open_atomic(target) as fh:
        fh.write("new")
        fh.write("\n")
    assert target.read_text() == "new\n" and sorted(tmp_path.iterdir()) == [target]


DOCUMENTS = [
    "",
    "name: x\n",
    "- 1\n- 2\n",
    "plain scalar\n",
    "name: y\nswitches: []\n",
    "name: z\nmax_port: 0x1ff\ncpu_port: null\nswitches:\n- &a {name: p0-t1-0, role: t1, plane: 0}\n"
    "- {name: p0-t0-0, role: t0, plane: 0, hosts: {h0: {port: 1, mac: '02:00:00:00:00:01'}}, uplinks: {p0-t1-0: 2}}\n"
    "- *a\n- {<<: *a, name: p0-t1-1}\nextra: [yes, no, 1.5, ~]\n",
    "switches: {not: a list}\n",
]


@needs("libyaml", yamlload.available(), "PyYAML built without libyaml")
@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_record_by_record_loader_gives_what_safe_load_gives(text: str) -> None:
    assert yamlload.load(text) == yaml.safe_load(text)
    assert yamlload.load(io.StringIO(text)) == yaml.safe_load(text)


@needs("libyaml", yamlload.available(), "PyYAML built without libyaml")
@pytest.mark.parametrize(("text", "problem"), [
    ("name: x\n---\nname: y\n", "line 2: expected a single document in the stream"),  # our words
    ("switches:\n- {name: a\n", "line 3: "),  # the rest of the line is libyaml's or PyYAML's wording
    ("<<: {name: x}\n", "line 1: "),
    ("switches:\n- *nothing\n", "line 2: "),
])
def test_the_record_by_record_loader_rejects_what_it_cannot_read(text: str, problem: str) -> None:
    with pytest.raises(yamlload.YamlError) as err:
        yamlload.load(text)
    assert str(err.value).startswith(f"not valid YAML: {problem}") and "\n" not in str(err.value), str(err.value)


def test_a_generated_topology_file_loads_equal_to_the_pure_python_loader(tmp_path: Path) -> None:
    path = tmp_path / "fabric.yaml"
    text = yaml.safe_dump(to_dict(build(2, 3, 4, 2, name="y")), sort_keys=False)
    path.write_text(text)
    assert topology.load_yaml(text) == yaml.load(text, Loader=yaml.SafeLoader)  # noqa: S506
    assert to_dict(load(path)) == to_dict(build(2, 3, 4, 2, name="y"))
