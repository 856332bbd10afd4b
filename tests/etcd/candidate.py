"""A controller candidate for the leadership tests: campaigns with controller.state.leader and, while
leading, makes a 'write' every 20 ms only when its fence allows, as the service's switch writes do.
Each line of its log (argv[3]) is JSON: campaigning, leader (election id), check (the time the fence
was asked, before asking, and its answer), lost (after one last check)."""

from __future__ import annotations

import json
import sys
import threading
import time

from controller.state.etcdstore import EtcdStore
from controller.state.leader import Leadership
from controller.state.store import parse_url


def main(url: str, ttl: int, log_path: str) -> None:
    store = EtcdStore(parse_url(url), "two_plane_lab")
    log = open(log_path, "a", buffering=1)

    def say(**doc: object) -> None:
        log.write(json.dumps({"t": time.time(), **doc}) + "\n")

    stop = threading.Event()
    while True:
        leadership = Leadership(store, ttl)
        say(kind="campaigning")
        leadership.campaign(stop)
        say(kind="leader", election_id=leadership.election_id, create_revision=leadership.create_revision)
        def check() -> None:
            before = time.time()
            why = leadership.fence()
            say(kind="check", before=before, election_id=leadership.election_id, write=why is None, why=why)

        while not leadership.lost.is_set():
            check()
            time.sleep(0.02)
        # a write that was queued when the loss came asks the fence too: so every loss is followed by at
        # least one check, whichever thread (this loop or the renewal) ran first after a thaw
        check()
        say(kind="lost", why=leadership.lost_why, election_id=leadership.election_id)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
