"""`fabricctl lab fault ...`: inject, list, undo and clear faults in a running lab (mininet_labs/faults.py);
`fabricctl lab carrier-watch`: the lab's port status to a controller's --carrier-events socket."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import click

from controller import exitcodes
from controller.exitcodes import OpError

DEFAULT_DIR = "/tmp/srv6-fabric-lab"


def _dir_option(f: Any) -> Any:
    return click.option("--dir", "lab_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DIR,
                        show_default=True, envvar="FABRIC_LAB_DIR", help="The lab directory (env FABRIC_LAB_DIR).")(f)


def _json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(f)


def _undo_option(f: Any) -> Any:
    return click.option("--undo", is_flag=True, help="Undo this fault instead (it must be active).")(f)


def _attach(lab_dir: Path) -> Any:
    from mininet_labs.lab import Lab, LabError

    try:
        return Lab.attach(lab_dir)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None


def _apply(lab_dir: Path, kind: str, target: list[str], undo: bool, as_json: bool, **params: Any) -> None:
    from mininet_labs import faults

    running = _attach(lab_dir)
    try:
        f = faults.undo(running, kind, target) if undo else faults.inject(running, kind, target, **params)
    except faults.FaultError as e:
        raise OpError(str(e), exitcodes.BAD_INPUT) from None
    if as_json:
        click.echo(json.dumps({"undone" if undo else "injected": f.describe(), "kind": f.kind, "target": f.target,
                               "params": f.params}))
    else:
        click.echo(f"{'undone' if undo else 'injected'}: {f.describe()}")


@click.group("fault")
def fault() -> None:
    """Break the running lab without telling the controller; each fault undoable.

    Link faults act on SWITCH's end of the link SWITCH -- PEER (one T0, one T1 of a plane):
    what SWITCH sends towards PEER. Active faults are named by `lab status` and all cleared by
    `lab down` (and `lab fault clear`).

    \b
    Examples:
      fabricctl lab fault carrier-down p0-t0-0 p0-t1-1     # the veth down: real carrier loss
      fabricctl lab fault carrier-up p0-t0-0 p0-t1-1
      fabricctl lab fault blackhole p0-t0-0 p0-t1-1        # one-way: nftables egress drop
      fabricctl lab fault gray p0-t0-0 p0-t1-1 20          # 20 % random loss, one way
      fabricctl lab fault freeze p0-t1-1; fabricctl lab fault thaw p0-t1-1
      fabricctl lab fault list; fabricctl lab fault clear
    """


def _example(doc: str, *lines: str) -> str:
    return doc + "\n\n\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


def _link_command(kind: str, doc: str, extra: list[Any] | None = None, args: str = "") -> None:
    def cmd(switch: str, peer: str, lab_dir: Path, undo: bool, as_json: bool, **params: Any) -> None:
        _apply(lab_dir, kind, [switch, peer], undo, as_json, **params)

    cmd.__doc__ = _example(doc, f"fabricctl lab fault {kind} p0-t0-0 p0-t1-1{args}",
                           f"fabricctl lab fault {kind} p0-t0-0 p0-t1-1{args} --undo")
    for deco in reversed([fault.command(kind), click.argument("switch"), click.argument("peer"), *(extra or []),
                          _dir_option, _undo_option, _json_option]):
        cmd = deco(cmd)


_link_command("carrier-down", "Set SWITCH's port towards PEER down: both ends lose carrier.")
_link_command("blackhole", "Drop everything SWITCH sends towards PEER (one way; carrier stays up).")
_link_command("gray", "Drop PERCENT % of what SWITCH sends towards PEER, at random.",
              [click.argument("percent", type=click.IntRange(1, 100))], " 20")
_link_command("slow", "Shape what SWITCH sends towards PEER to KBIT kbit/s (tbf).",
              [click.argument("kbit", type=click.IntRange(min=1)),
               click.option("--latency-ms", type=click.IntRange(min=1), default=50, show_default=True,
                            help="The longest a frame may wait in the shaper's queue.")], " 1000")
_link_command("flap", "Set SWITCH's port towards PEER down and up every --period-ms, until undone.",
              [click.option("--period-ms", type=click.IntRange(min=10), default=500, show_default=True)])


@fault.command("carrier-up")
@click.argument("switch")
@click.argument("peer")
@_dir_option
@_json_option
def carrier_up(switch: str, peer: str, lab_dir: Path, as_json: bool) -> None:
    """Undo carrier-down: the port up again.

    \b
    Example:
      fabricctl lab fault carrier-up p0-t0-0 p0-t1-1
    """
    _apply(lab_dir, "carrier-down", [switch, peer], True, as_json)


def _switch_command(kind: str, name: str, undo: bool, doc: str) -> None:
    def cmd(switch: str, lab_dir: Path, as_json: bool, **kw: Any) -> None:
        _apply(lab_dir, kind, [switch], undo or kw.get("undo", False), as_json)

    cmd.__doc__ = _example(doc, f"fabricctl lab fault {name} p0-t1-1")
    decos = [fault.command(name), click.argument("switch"), _dir_option, _json_option]
    if not undo:
        decos.append(_undo_option)
    for deco in reversed(decos):
        cmd = deco(cmd)


_switch_command("freeze", "freeze", False, "Stop SWITCH's process (SIGSTOP): a hung switch, its TCP still open.")
_switch_command("freeze", "thaw", True, "Undo freeze (SIGCONT).")
_switch_command("kill", "kill", False, "Kill SWITCH's process (SIGKILL): a crash; its tables are gone.")
_switch_command("kill", "restart", True, "Undo kill: start the switch again as the lab started it.")


@fault.command("host-nic-down")
@click.argument("host")
@click.argument("plane", type=click.IntRange(min=0))
@_dir_option
@_undo_option
@_json_option
def host_nic_down(host: str, plane: int, lab_dir: Path, undo: bool, as_json: bool) -> None:
    """Set HOST's NIC in PLANE down inside its namespace (its leaf port loses carrier).

    \b
    Example:
      fabricctl lab fault host-nic-down h1 0; fabricctl lab fault host-nic-down h1 0 --undo
    """
    _apply(lab_dir, "host-nic-down", [host, str(plane)], undo, as_json)


@fault.command("list")
@_dir_option
@_json_option
def list_cmd(lab_dir: Path, as_json: bool) -> None:
    """The active faults of the lab in DIR.

    \b
    Example:
      fabricctl lab fault list --json
    """
    from mininet_labs import faults

    active = faults.active(lab_dir)
    if as_json:
        click.echo(json.dumps([{"kind": f.kind, "target": f.target, "params": f.params, "what": f.describe()}
                               for f in active]))
        return
    for f in active:
        click.echo(f.describe())
    if not active:
        click.echo("no active faults")


@fault.command("clear")
@_dir_option
@_json_option
def clear_cmd(lab_dir: Path, as_json: bool) -> None:
    """Undo every active fault (the last injected first).

    \b
    Example:
      fabricctl lab fault clear
    """
    from mininet_labs import faults

    running = _attach(lab_dir)
    try:
        done = faults.clear(running)
    except faults.FaultError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    if as_json:
        click.echo(json.dumps({"undone": [f.describe() for f in done]}))
    else:
        click.echo(f"undone: {len(done)} faults" + "".join(f"\n  {f.describe()}" for f in done))


@click.command("carrier-watch")
@click.option("--to", "socket_path", type=click.Path(dir_okay=False, path_type=Path), required=True, metavar="SOCKET",
              help="The socket of a controller started with --carrier-events SOCKET.")
@_dir_option
def carrier_watch(socket_path: Path, lab_dir: Path) -> None:
    """Send the lab's port status (the kernel's link events on its switch ports) to a controller.

    Runs until SIGTERM or Ctrl-C; one line per carrier change on stderr.

    \b
    Example:
      fabricctl --election-id 10 run --carrier-events /tmp/carrier.sock &
      fabricctl lab carrier-watch --to /tmp/carrier.sock
    """
    from mininet_labs.carrier import CarrierWatcher
    from mininet_labs.lab import LabError

    running = _attach(lab_dir)

    def show(st: Any) -> None:
        click.echo(f"{st.switch}:{st.port} carrier {'up' if st.up else 'lost'}", err=True)

    try:
        watcher = CarrierWatcher(running.carrier(), socket_path, on_change=show)
    except LabError as e:
        raise OpError(str(e), exitcodes.SWITCH_ERROR) from None
    click.echo(f"watching the carrier of {len(watcher.source.carrier)} switch ports; port status to {socket_path}",
               err=True)
    signal.signal(signal.SIGTERM, lambda *_: watcher.loop.stop())
    try:
        watcher.run_forever()
    except KeyboardInterrupt:
        pass
