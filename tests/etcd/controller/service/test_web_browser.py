"""The live view on etcd in headless Chromium: a failure `fabricctl fail` records in etcd turns its link red,
the leader's published view names its host, a controller's event shows, the restore turns the link back."""

from __future__ import annotations

import threading
import time

from click.testing import CliRunner

from controller.model.topology import load
from controller.service.web.server import WebServer
from controller.service.web.view import Sources
from controller.state.etcdstore import EtcdStore, EventSink
from controller.state.leader import Leadership
from controller.state.store import parse_url
from fabricctl.main import cli
from tests.browser import chromium, link_look, wait_for
from tests.etcd.cluster import EtcdCluster
from tests.etcd.conftest import LAB

RED, GREEN = "rgb(211, 47, 47)", "rgb(46, 125, 50)"
LINK = "p0-t0-0 -- p0-t1-1"


def fabricctl(cluster: EtcdCluster, *args: str) -> None:
    r = CliRunner().invoke(cli, list(args), env={"FABRIC_TOPOLOGY": str(LAB), "FABRIC_STORE": cluster.url})
    assert r.exit_code == 0, r.output


def test_the_page_on_etcd_turns_a_recorded_link_red_names_the_leader_and_shows_events(cluster: EtcdCluster):
    topo = load(LAB)
    store = EtcdStore(parse_url(cluster.url), topo.name)
    server = WebServer(Sources(topo, "srv6_spray", LAB.parent / ".unused-state.json", None,
                               EtcdStore(parse_url(cluster.url), topo.name)), "127.0.0.1", 0)
    server.start()
    lead = Leadership(store, ttl=3, identity={"host": "m2", "pid": 5151})
    try:
        with chromium() as driver:
            driver.get(server.url)
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] and x, 60, "the page drew no state")
            assert (look["state"], look["stroke"]) == ("up", GREEN)
            fabricctl(cluster, "fail", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] == "failed" and x, 60,
                            "the link did not turn failed")
            assert look == {"cls": "link state-failed by-operator", "state": "failed", "by": "operator", "stroke": RED}

            assert lead.campaign(threading.Event())
            store.publish_view({"pid": 5151, "election_id": lead.election_id, "updated": time.time(),
                                "sessions": {s.name: {"role": "primary"} for s in topo.switches},
                                "leader": {"host": "m2", "election_id": f"{lead.create_revision},0"}}, lead.lease)
            text = wait_for(lambda: (t := driver.execute_script(
                "return document.getElementById('controller').textContent")) and "leader m2" in t and t, 60,
                "the leader's view did not show")
            assert text.startswith(f"controller leader m2 pid 5151, election id {lead.create_revision},0: primary on 8/8")

            sink = EventSink(store)
            sink({"t": 1700000000.5, "kind": "link_down", "link": ["p0-t0-0", "p0-t1-1"]})
            sink.close(timeout=30)
            row = wait_for(lambda: driver.execute_script(
                "const r = document.querySelector('#events tbody tr'); return r && r.textContent"), 60, "no event row")
            assert "link_down" in row and 'link=["p0-t0-0","p0-t1-1"]' in row

            fabricctl(cluster, "restore", "link", "p0-t0-0", "p0-t1-1", "--no-apply")
            look = wait_for(lambda: (x := link_look(driver, LINK)) and x["state"] == "up" and x, 60,
                            "the link did not turn back")
            assert (look["cls"], look["stroke"]) == ("link state-up", GREEN)
    finally:
        if lead.lease:
            lead.resign()
        server.close()
