"""fabricctl endpoint: endpoint mode (hosts spray over their own SRv6 EVs) on a running lab: scenarios side by
side, the senders' EV state change events, and the controller's EV operations on a running sender."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.exitcodes import OpError
from fabricctl.options import MAX_SECONDS, Finite

FAULTS = ("cut", "blackhole", "gray", "slow", "incast")


@click.group("endpoint")
def endpoint() -> None:
    """Endpoint mode: hosts write the uSID carriers of their EVs (OCP MRC's SRv6 entropy values), keep each
    EV's state (GOOD, ASSUMED_BAD, DENIED, UNKNOWN) and route around faults themselves.

    \b
    Examples:
      fabricctl lab up --t1 4
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare gray p0-t0-0 p0-t1-1 --percent 10 --modes host,host-spray --json
      fabricctl endpoint compare incast h2 --modes host,host-trim
      fabricctl endpoint events --follow
      fabricctl endpoint query h0 --to h2
      fabricctl endpoint deny h0 h2 0x401
    """


@endpoint.command("compare")
@click.argument("fault", type=click.Choice(FAULTS))
@click.argument("where", nargs=-1, required=True, metavar="T0 T1 | HOST")
@click.option("--modes", help="Comma-separated. Link faults (default leaf,host): leaf (leaves spray, controller "
                              "told), leaf-unattended (leaves spray, a controller service in this process finds the "
                              "fault by its probes), host (health-aware EVs), host-spray, host-ethereal, host-hash, "
                              "roce-gbn (one EV per QP, go-back-N: RoCEv2 without selective repeat). "
                              "incast (default "
                              "host,host-trim): host, host-trim, leaf, leaf-trim (-trim: the switches trim).")
@click.option("--percent", type=click.IntRange(1, 100), default=10, show_default=True, help="gray: loss in percent.")
@click.option("--rate-limit", default="2mbit", show_default=True, help="slow: the tbf rate on the T0's uplink.")
@click.option("--rate", type=Finite(min=1), default=500.0, show_default=True, help="Packets/s per sender.")
@click.option("--seconds", type=Finite(min=1, max=MAX_SECONDS), default=4.0, show_default=True)
@click.option("--fault-at", type=Finite(min=0.3, max=MAX_SECONDS), default=1.0, show_default=True)
@click.option("--repair-at", type=Finite(min=0.5, max=MAX_SECONDS), default=2.5, show_default=True)
@click.option("--min-rto-ms", type=Finite(min=1), default=25.0, show_default=True)
@click.option("--recover-probes", type=click.IntRange(1, 256), default=None, metavar="N",
              help="Host modes: answered probes in a row that bring an ASSUMED_BAD EV back (doubled per gray "
                   "strike; default the senders' own).")
@click.option("--senders", help="incast: comma-separated senders (default: every host under another leaf).")
@click.option("--bottleneck-pps", type=click.IntRange(1, 1_000_000), default=200, show_default=True,
              help="incast: packets/s the receiving host's leaf ports serve during the fault.")
@click.option("--queue-depth", type=click.IntRange(1, 4096), default=32, show_default=True,
              help="incast: those ports' egress queue capacity in packets (a full queue tail-drops).")
@click.option("--trim-at", type=click.IntRange(1, 4096), default=8, show_default=True,
              help="incast, -trim modes: trim packets that find this many queued ahead.")
@click.option("--ecn-at", type=click.IntRange(0, 4096), default=0, show_default=True,
              help="incast: mark ECN CE from this queue depth in every mode (0: off; below --trim-at).")
@click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default="/tmp/srv6-fabric-lab",
              show_default=True, help="The lab's directory.")
@click.option("--png", type=click.Path(dir_okay=False, path_type=Path), help="Plot goodput and reordering per mode.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def compare_cmd(fault: str, where: tuple[str, ...], modes: str | None, percent: int, rate_limit: str, rate: float,
                seconds: float, fault_at: float, repair_at: float, min_rto_ms: float, recover_probes: int | None,
                senders: str | None,
                bottleneck_pps: int, queue_depth: int, trim_at: int, ecn_at: int, lab_dir: Path, png: Path | None,
                as_json: bool) -> None:
    """The same traffic and the same fault on link T0 -- T1 (incast: to HOST), mode after mode, side by side.

    Every host under T0 sends to its peer under the next leaf over 4 QPs. `leaf`: plain RoCEv2,
    the leaves spray, the fault is announced to the controller at once (`fabricctl fail link`)
    and restored after the repair; host modes: the hosts write the carriers and nobody is told.
    Per mode: first-try losses, retransmissions, loss window (fault to the last first-try loss),
    goodput during the fault against before it, reorder histogram, CE and trim counts.

    incast HOST: every host under another leaf (--senders) sends to HOST, whose leaf ports are a bottleneck
    from --fault-at to --repair-at (bmv2 queue rate and depth); trimming off (host, leaf) or on
    (host-trim, leaf-trim); the senders' DCTCP congestion window on in every mode. Also per mode:
    the time from a lost or trimmed send to its resend by how it was seen (nack, sack, timeout)
    and the bottleneck ports' CE-marked and trimmed packets as the switches counted them.

    \b
    Examples:
      fabricctl endpoint compare cut p0-t0-0 p0-t1-1 --png cut.png
      fabricctl endpoint compare blackhole p0-t0-0 p0-t1-1 --modes leaf,host,host-spray
      fabricctl endpoint compare slow p0-t0-0 p0-t1-1 --rate-limit 1mbit --json > slow.json
      fabricctl endpoint compare incast h2 --bottleneck-pps 200 --trim-at 8 --png incast.png
    """
    from endpoint import scenarios
    from mininet_labs.lab import Lab, LabError

    sch = scenarios.EndpointSchedule(seconds=seconds, fault_at=fault_at, repair_at=repair_at, rate=rate,
                                     min_rto_ms=min_rto_ms)
    if (why := sch.problem()) is not None:
        raise OpError(why)
    if recover_probes is not None:
        sch.recover_probes = recover_probes
    incast = fault == "incast"
    if len(where) != (1 if incast else 2):
        raise OpError(f"{fault} takes {'one host' if incast else 'two switches, T0 and T1'}, got {len(where)} "
                      f"argument{'s' * (len(where) != 1)}")
    known = scenarios.INCAST_MODES if incast else scenarios.MODES
    modes = modes if modes is not None else "host,host-trim" if incast else "leaf,host"
    chosen = tuple(m.strip() for m in modes.split(",") if m.strip())
    bad = [m for m in chosen if m not in known]
    if bad or not chosen:
        raise OpError(f"unknown mode '{bad[0] if bad else modes}' (known: {', '.join(known)})")
    if incast and ecn_at and ecn_at >= trim_at:
        raise OpError(f"--ecn-at ({ecn_at}) must be below --trim-at ({trim_at})")
    if png is not None:
        from controller.plotting import PlotUnavailable, pyplot as _pyplot
        try:
            _pyplot()
        except PlotUnavailable as e:
            raise OpError(str(e), exitcodes.TOOLCHAIN) from None
    try:
        lab = Lab.attach(lab_dir)
        if incast:
            if where[0] not in lab.model.hosts:
                raise OpError(f"unknown host '{where[0]}' (hosts: {', '.join(lab.hosts)})")
            chosen_senders = [s.strip() for s in senders.split(",") if s.strip()] if senders else None
            result = scenarios.compare_incast(lab, where[0], senders=chosen_senders, modes=chosen, schedule=sch,
                                              pps=bottleneck_pps, depth=queue_depth, ecn_qdepth=ecn_at,
                                              trim_qdepth=trim_at)
        else:
            for name in where:
                if not lab.model.has_switch(name):
                    raise OpError(f"unknown switch '{name}'")
            result = scenarios.compare(lab, fault, *where, modes=chosen, schedule=sch, percent=percent,
                                       rate=rate_limit)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    doc = result.to_json()
    if png is not None:
        from endpoint.plot import comparison
        comparison(doc, png)
    click.echo(json.dumps(doc, indent=1) if as_json else "\n".join(scenarios.describe(result)))


# --- EV events and the controller's operations on a running sender ----------------------------------

_DIR = click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default="/tmp/srv6-fabric-lab",
                    show_default=True, help="The lab's directory (its latest endpoint run is used).")
_RUN = click.option("--run", "run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
                    help="The endpoint run's directory (default: the lab's latest).")


def latest_run(lab_dir: Path) -> Path:
    """The newest endpoint run directory of a lab (runs are named by their start in ns)."""
    runs = [p for p in (lab_dir / "endpoint").glob("*") if p.is_dir() and p.name.isdigit()]
    if not runs:
        raise OpError(f"no endpoint run in {lab_dir / 'endpoint'} (start one with `fabricctl endpoint compare`)")
    return max(runs, key=lambda p: int(p.name))


def _run(lab_dir: Path, run_dir: Path | None) -> Path:
    return run_dir if run_dir is not None else latest_run(lab_dir)


def describe_event(e: dict[str, Any]) -> str:
    drops = f" ({e['drop_count']} events dropped before)" if e.get("drop_count") else ""
    return (f"{e.get('t', 0):.4f} {e.get('host', '?')} -> {e.get('profile', '?')} ev {int(e.get('ev', 0)):#06x} "
            f"port {e.get('port', '?')}: {e.get('state', '?')} ({e.get('why', '')}){drops}")


def _lines(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines of `path` from byte `offset`, and the offset after them."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].splitlines():
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out, offset + end


def follow_events(run: Path, hosts: tuple[str, ...], follow: bool, follow_for: float | None) -> Iterator[dict[str, Any]]:
    """The events of a run's senders (of `hosts`, default all) in file order per sender; with `follow`, the
    ones appended later too, until `follow_for` seconds have passed (None: until interrupted)."""
    offsets: dict[Path, int] = {}
    deadline = None if follow_for is None else time.monotonic() + follow_for
    while True:
        files = sorted(run.glob("events-*.jsonl"))
        for path in files:
            host = path.name[len("events-"):-len(".jsonl")]
            if hosts and host not in hosts:
                continue
            docs, offsets[path] = _lines(path, offsets.get(path, 0))
            yield from docs
        if not follow or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic())))


@endpoint.command("events")
@click.argument("hosts", nargs=-1, metavar="[HOST]...")
@_DIR
@_RUN
@click.option("--follow", is_flag=True, help="Keep printing events as the senders write them (Ctrl-C to stop).")
@click.option("--follow-for", type=Finite(min=0, max=86400), metavar="SECONDS",
              help="With --follow: stop after this long.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per event and line.")
def events_cmd(hosts: tuple[str, ...], lab_dir: Path, run_dir: Path | None, follow: bool, follow_for: float | None,
               as_json: bool) -> None:
    """EV state change events of an endpoint run's senders: per event the time, the sender, the destination
    (the EV profile), the EV and its port (plane), the new state (GOOD or ASSUMED_BAD, the states the
    specification's event mask supports), why, and how many events the sender's queue dropped before it.

    \b
    Examples:
      fabricctl endpoint events
      fabricctl endpoint events h0 --json | jq 'select(.state == "assumed_bad")'
      fabricctl endpoint events --follow
    """
    run = _run(lab_dir, run_dir)
    try:
        for e in follow_events(run, hosts, follow, follow_for):
            click.echo(json.dumps(e) if as_json else describe_event(e))
    except KeyboardInterrupt:  # Ctrl-C is how a --follow ends: an ordinary stop, not an error
        pass


def _ev(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise OpError(f"'{text}' is not an EV id (a number, e.g. 1025 or 0x401)") from None
    if not 0 <= value < 1 << 14:
        raise OpError(f"EV {text} is outside 0-0x3fff (14 bits)")
    return value


def _ask(lab_dir: Path, run_dir: Path | None, host: str, req: dict[str, Any]) -> dict[str, Any]:
    from endpoint.control import ControlError, request

    path = _run(lab_dir, run_dir) / f"control-{host}.sock"
    try:
        answer = request(path, req)
    except ControlError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    if "error" in answer:
        raise OpError(f"{host}: {answer['error']}")
    return answer


def _show(answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(answer, indent=1))
        return
    for e in answer.get("evs", []):
        click.echo(f"{answer.get('host', '?')} -> {e['profile']} ev {e['ev']:#06x} port {e['port']}: {e['state']}"
                   f"{'' if e['active'] else ' (backup)'}" + (f", gray {e['gray']} (needs {e['need']} probes)"
                                                              if e.get("gray") else "")
                   + (", on probation" if e.get("probation") else "")
                   + (f", weight {e['weight']:g}" if e.get("weight", 1) != 1 else ""))


_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@endpoint.command("query")
@click.argument("host")
@click.option("--to", "dst", help="Only the EVs towards this destination.")
@_DIR
@_RUN
@_JSON
def query_cmd(host: str, dst: str | None, lab_dir: Path, run_dir: Path | None, as_json: bool) -> None:
    """QUERY_EV_STATE: the state of every EV of a running sender (active or backup).

    \b
    Examples:
      fabricctl endpoint query h0
      fabricctl endpoint query h0 --to h2 --json
    """
    _show(_ask(lab_dir, run_dir, host, {"op": "query", "dst": dst}), as_json)


@endpoint.command("deny")
@click.argument("host")
@click.argument("dst")
@click.argument("evs", nargs=-1, required=True, metavar="EV...")
@_DIR
@_RUN
@_JSON
def deny_cmd(host: str, dst: str, evs: tuple[str, ...], lab_dir: Path, run_dir: Path | None, as_json: bool) -> None:
    """Deny EVs of a running sender towards DST (MODIFY_EV_STATE to DENIED): never used nor probed until
    `fabricctl endpoint set-state` takes them back. All or none: an unknown EV changes nothing.

    \b
    Examples:
      fabricctl endpoint deny h0 h2 0x401
    """
    _show(_ask(lab_dir, run_dir, host, {"op": "deny", "dst": dst, "evs": [_ev(e) for e in evs]}), as_json)


@endpoint.command("set-state")
@click.argument("host")
@click.argument("dst")
@click.argument("ev")
@click.argument("state", type=click.Choice(["good", "assumed_bad", "denied", "unknown"]))
@_DIR
@_RUN
@_JSON
def set_state_cmd(host: str, dst: str, ev: str, state: str, lab_dir: Path, run_dir: Path | None, as_json: bool) -> None:
    """MODIFY_EV_STATE: set an EV's state (unknown takes a denied EV back; assumed_bad starts probing it).

    \b
    Examples:
      fabricctl endpoint set-state h0 h2 0x401 unknown
    """
    _show(_ask(lab_dir, run_dir, host, {"op": "set_state", "dst": dst, "ev": _ev(ev), "state": state}), as_json)


@endpoint.command("replace")
@click.argument("host")
@click.argument("dst")
@click.argument("ev")
@click.argument("ev_new", metavar="NEW")
@_DIR
@_RUN
@_JSON
def replace_cmd(host: str, dst: str, ev: str, ev_new: str, lab_dir: Path, run_dir: Path | None, as_json: bool) -> None:
    """REPLACE_EV: backup EV NEW takes active EV EV's place towards DST (the sender needs backups:
    `python3 -m endpoint send --backups-per-plane N`).

    \b
    Examples:
      fabricctl endpoint replace h0 h2 0x401 0x403
    """
    _show(_ask(lab_dir, run_dir, host, {"op": "replace", "dst": dst, "ev": _ev(ev), "ev_new": _ev(ev_new)}), as_json)


@endpoint.command("denylist")
@click.argument("loops_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), metavar="DIR")
@click.option("--push", is_flag=True, help="Record the merged list beside the failures (the state file, or --store) "
                                          "and push it to every sender of the endpoint run: DENIED for the EVs "
                                          "crossing a failed link, UNKNOWN again for those the last push denied.")
@click.option("--follow", is_flag=True, help="With --push: merge and push again whenever a report changes, and "
                                            "retry the senders that were not reached (Ctrl-C to stop).")
@click.option("--every", type=Finite(min=0.01, max=3600), default=0.2, show_default=True, metavar="SECONDS",
              help="With --follow: how often the reports are read.")
@click.option("--follow-for", type=Finite(min=0, max=86400), metavar="SECONDS",
              help="With --follow: stop after this long.")
@click.option("--socket-timeout", type=Finite(min=0.01, max=60), default=1.0, show_default=True, metavar="SECONDS",
              help="The deadline of each request to a sender's control socket.")
@_DIR
@_RUN
@_JSON
@click.pass_obj
def denylist_cmd(env: Any, loops_dir: Path, push: bool, follow: bool, every: float, follow_for: float | None,
                 socket_timeout: float, lab_dir: Path, run_dir: Path | None, as_json: bool) -> None:
    """The fabric-wide denylist from the hosts' loop agents (`python3 -m endpoint loops --state DIR/loops-HOST.json`):
    each failed link with its kind and the hosts that saw it, and, with DIR/evs.json (the EV export), the EVs it
    denies at every host.

    With --push, the list is recorded (`fabricctl status` shows it) and every sender of the endpoint run (--run,
    default the lab's latest) is told through its control socket, so a host whose own loops saw nothing maps
    the EVs out too. Exit 1 when a sender could not be told (one line each; the others are told).

    \b
    Examples:
      fabricctl endpoint denylist /tmp/lab/loops/RUN
      fabricctl endpoint denylist /tmp/lab/loops/RUN --json
      fabricctl endpoint denylist /tmp/lab/loops/RUN --push
      fabricctl endpoint denylist /tmp/lab/loops/RUN --push --follow --follow-for 60
    """
    from controller.state.store import StoreError
    from fabricctl import denylist as dl

    if follow and not push:
        raise OpError("--follow keeps pushing: give --push too")
    try:
        reports = dl.read_reports(loops_dir)
        run = _run(lab_dir, run_dir) if push else None
        export = dl.load_export(loops_dir / "evs.json")
        if export is None and run is not None:
            export = dl.load_export(run / "evs.json")
    except ValueError as e:
        raise OpError(str(e)) from None
    if run is None:
        merged = dl.Denylist.from_reports(reports.failed)
        click.echo(json.dumps(dl.summary(reports, merged, export), indent=1) if as_json
                   else "\n".join(dl.text_lines(reports, merged, export)))
        return
    if export is None:
        raise OpError(f"--push needs the EV export: no evs.json in {loops_dir} or {run}")
    store = env.store()
    pusher = dl.Pusher(export, run, socket_timeout)
    deadline = None if follow_for is None else time.monotonic() + follow_for
    failed = False
    last: dl.Denylist | None = None
    try:
        while True:
            try:
                before, merged = dl.record(store, reports, env.timeout)
            except StoreError as e:
                raise OpError(str(e), dl.NOT_TOLD) from None
            if last is None or not merged.same_as(last) or pusher.pending(merged.links):
                results = pusher.push(before.links, merged.links)
                failed = not all(r.ok for r in results)
                doc = {**dl.summary(reports, merged, export), "record": store.where, "run": str(run),
                       "pushed": [r.to_json() for r in results]}
                if as_json:
                    click.echo(json.dumps(doc, indent=None if follow else 1))
                else:
                    click.echo("\n".join(dl.text_lines(reports, merged, None)))
                    click.echo(f"recorded in {store.where}; {len(results)} sender(s) in {run}")
                    for r in results:
                        click.echo(str(r), err=not r.ok)
                last = merged
            if not follow or (deadline is not None and time.monotonic() >= deadline):
                break
            time.sleep(every if deadline is None else max(0.0, min(every, deadline - time.monotonic())))
            try:
                reports = dl.read_reports(loops_dir)
            except ValueError as e:
                click.echo(f"error: {e}", err=True)  # a report being replaced: read again next time
    except KeyboardInterrupt:  # Ctrl-C is how a --follow ends: an ordinary stop, not an error
        pass
    if failed:
        raise click.exceptions.Exit(dl.NOT_TOLD)
