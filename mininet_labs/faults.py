"""Faults injected into a running lab, nobody told: carrier down, one-way blackhole, gray loss, slow link,
flapping link, frozen or killed switch, host NIC down. Each is recorded in DIR/lab-faults.json with
what undoes it, named by `lab status`, undone one by one, and all cleared by `lab down`.

Loss is emulated with an nftables netdev egress hook on the sending port (this kernel has neither
netem nor tc gact); a slow link with a tbf qdisc; carrier loss with `ip link set down` (the far end
of the veth loses carrier too; the routes and permanent neighbours the port's namespace loses with it are kept
and put back when the port is up again, by the undo and by a flapper each time: linkroutes); a frozen switch with
SIGSTOP. A port is reached where the lab's node backend says it
lives (bmv2: the root namespace; kernel: its switch's namespace); what a data plane lacks (no switch process to
freeze on the kernel's) is refused by name. The one fault library: endpoint.faults builds on it, and `Schedule` says
when a fault happens in a traffic run (the endpoint's runs add their senders' settings to it)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mininet_labs import linkroutes

FAULTS_NAME = "lab-faults.json"
LINK_KINDS = ("carrier-down", "blackhole", "gray", "slow", "flap")
SWITCH_KINDS = ("freeze", "kill")
HOST_KINDS = ("host-nic-down",)
KINDS = LINK_KINDS + SWITCH_KINDS + HOST_KINDS


@dataclass
class Schedule:
    """When a fault happens in a traffic run: traffic for `seconds` at `rate` packets/s per sender, `qps` QPs per
    pair; the fault at `fault_at`, its repair at `repair_at` (seconds after the senders start, `start_delay` after
    they were started, so all start together); receptions binned every `timeline_ms`."""

    seconds: float = 5.0
    fault_at: float = 1.5
    repair_at: float = 3.0
    rate: float = 400.0
    qps: int = 4
    timeline_ms: float = 20.0
    start_delay: float = 2.5  # for every sender process to come up on a busy machine: all start together

    def problem(self) -> str | None:
        """Why the times do not make a schedule (None when 0 < fault_at < repair_at < seconds)."""
        if not 0 < self.fault_at < self.repair_at < self.seconds:
            return (f"need 0 < --fault-at ({self.fault_at}) < --repair-at ({self.repair_at}) < "
                    f"--seconds ({self.seconds})")
        return None


class FaultError(ValueError):
    """A fault that cannot be injected or undone; one line saying why."""


@dataclass
class Fault:
    """One active fault: its kind, what it hits (a link's sending end `a` -> `b`, a switch, a host's NIC
    in a plane), its parameters, and what undoes it (interfaces, nftables table, PID)."""

    kind: str
    target: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    undo: dict[str, Any] = field(default_factory=dict)
    since: float = 0.0

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return self.kind, tuple(self.target)

    def describe(self) -> str:
        """'gray 20% p0-t0-0 -> p0-t1-1 (egress p0-t0-0-eth4)'."""
        what = {"carrier-down": "carrier down", "blackhole": "blackhole", "gray": f"gray {self.params.get('percent')}%",
                "slow": f"slow {self.params.get('kbit')} kbit/s", "flap": f"flap every {self.params.get('period_ms')} ms",
                "freeze": "frozen (SIGSTOP)", "kill": "killed", "host-nic-down": "host NIC down"}[self.kind]
        if self.kind in LINK_KINDS:
            return f"{what} {self.target[0]} -> {self.target[1]} ({self.undo.get('intf')})"
        if self.kind in HOST_KINDS:
            return f"{what} {self.target[0]} plane {self.target[1]} ({self.undo.get('intf')})"
        return f"{what} {self.target[0]}" + (f" (pid {self.undo['pid']})" if self.undo.get("pid") else "")


# --- the record -----------------------------------------------------------------------------------

def _path(lab_dir: str | os.PathLike[str]) -> Path:
    return Path(lab_dir) / FAULTS_NAME


@contextmanager
def _locked(lab_dir: str | os.PathLike[str]) -> Iterator[list[Fault]]:
    """The active faults, to change in place; saved (atomically) at the end, under a lock file."""
    path = _path(lab_dir)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        faults = active(lab_dir)
        yield faults
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(f) for f in faults], indent=1) + "\n")
        tmp.replace(path)


def active(lab_dir: str | os.PathLike[str]) -> list[Fault]:
    """The faults injected into the lab in lab_dir and not undone (none when there is no record)."""
    try:
        doc = json.loads(_path(lab_dir).read_text())
    except (OSError, ValueError):
        return []
    return [Fault(**d) for d in doc if isinstance(d, dict)]


def _table(lab_dir: str | os.PathLike[str], kind: str, intf: str, netns: str | None = None) -> str:
    """An nftables table name of ours, unique per lab, kind and interface (and its namespace)."""
    where = f"{netns}:{intf}" if netns else intf
    h = hashlib.sha1(f"{Path(lab_dir).resolve()}|{kind}|{where}".encode()).hexdigest()[:10]
    return f"srv6fault_{h}"


def _in(netns: str | None, argv: Sequence[str]) -> list[str]:
    """argv run where a port lives: its switch's namespace (the kernel lab's), else the root namespace."""
    return ["ip", "netns", "exec", netns, *argv] if netns else list(argv)


def _run(*argv: str, netns: str | None = None) -> None:
    proc = subprocess.run(_in(netns, argv), capture_output=True, text=True)
    if proc.returncode != 0:
        raise FaultError(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")


def _quiet(*argv: str, netns: str | None = None) -> None:
    """argv where the port lives, its failure ignored (undoing what may be gone already)."""
    subprocess.run(_in(netns, argv), capture_output=True)


# --- inject / undo ----------------------------------------------------------------------------------

def _link_end(lab: Any, a: str, b: str) -> tuple[str, str | None]:
    """The interface of switch `a`'s end of the T0-T1 link a -- b (the port a sends to b on) and its namespace,
    as the lab's node backend names them."""
    from mininet_labs.labstate import LabError

    try:
        ends = lab.nodes.link_ports(lab.model, lab.state, a, b)
    except LabError as e:
        raise FaultError(str(e)) from None
    end = next(e for e in ends if e.switch == a)
    return end.intf, end.netns


def inject(lab: Any, kind: str, target: list[str], **params: Any) -> Fault:
    """Inject one fault into a running lab (a `Lab` or `Lab.attach`), record it and return it;
    FaultError (nothing done) when it is not a fault we can inject, or the same is active already."""
    if kind not in KINDS:
        raise FaultError(f"unknown fault '{kind}' (faults: {', '.join(KINDS)})")
    fault = Fault(kind, [str(t) for t in target], params, since=time.time())
    with _locked(lab.dir) as faults:
        if any(f.key == fault.key for f in faults):
            raise FaultError(f"{fault.kind} on {' '.join(fault.target)} is active already ('--undo' undoes it)")
        from mininet_labs.labstate import LabError

        try:
            _do(lab, fault)
        except LabError as e:  # what the lab's data plane cannot do (Unsupported), said by its backend
            raise FaultError(str(e)) from None
        faults.append(fault)
    return fault


def _do(lab: Any, f: Fault) -> None:
    if f.kind in LINK_KINDS:
        if len(f.target) != 2:
            raise FaultError(f"{f.kind} needs a link: SWITCH PEER (the fault is on SWITCH's end, towards PEER)")
        intf, ns = _link_end(lab, *f.target)
        f.undo["intf"] = intf
        if ns:
            f.undo["netns"] = ns
        if f.kind == "carrier-down":
            f.undo["kept"] = _snapshot(lambda argv: _in(ns, argv), intf)
            _run("ip", "link", "set", intf, "down", netns=ns)
        elif f.kind in ("blackhole", "gray"):
            table = f.undo["nft_table"] = _table(lab.dir, f.kind, intf, ns)
            verdict = ["drop"]
            if f.kind == "gray":
                pct = int(f.params.get("percent", 0))
                if not 0 < pct <= 100:
                    raise FaultError(f"gray loss must be 1..100 percent, not {pct}")
                verdict = ["numgen", "random", "mod", "100", "<", str(pct), "drop"]
            _run("nft", "add", "table", "netdev", table, netns=ns)
            try:
                _run("nft", "add", "chain", "netdev", table, "egress",
                     f'{{ type filter hook egress device "{intf}" priority 0; }}', netns=ns)
                _run("nft", "add", "rule", "netdev", table, "egress", *verdict, netns=ns)
            except FaultError:
                _quiet("nft", "delete", "table", "netdev", table, netns=ns)
                raise
        elif f.kind == "slow":
            kbit = int(f.params.get("kbit", 0))
            if kbit <= 0:
                raise FaultError(f"a slow link needs a rate above 0 kbit/s, not {kbit}")
            _run("tc", "qdisc", "replace", "dev", intf, "root", "tbf", "rate", f"{kbit}kbit", "burst", "16kbit",
                 "latency", f"{int(f.params.get('latency_ms', 50))}ms", netns=ns)
        elif f.kind == "flap":
            period = int(f.params.get("period_ms", 500))
            if period < 10:
                raise FaultError(f"a flap period below 10 ms is not a flap: {period}")
            from mininet_labs.labstate import ENV_MARK  # lab down stops anything carrying the lab's mark

            kept = f.undo["kept"] = _snapshot(lambda argv: _in(ns, argv), intf)
            proc = subprocess.Popen(_in(ns, [sys.executable, "-m", "mininet_labs.faults", "flap", intf, str(period)]),
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True, env={**os.environ, ENV_MARK: str(lab.dir)})
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(kept).encode())  # what it puts back each time the port is up again
            proc.stdin.close()
            f.undo["pid"] = proc.pid
    elif f.kind in SWITCH_KINDS:
        if len(f.target) != 1:
            raise FaultError(f"{f.kind} needs one switch")
        sw = _switch(lab, f.target[0])
        if f.kind == "freeze":
            lab.nodes.require("switch processes to freeze")
            pid = sw.get("pid")
            if not pid:
                raise FaultError(f"{f.target[0]} is not running (no PID in the lab's state)")
            os.kill(pid, signal.SIGSTOP)
            f.undo["pid"] = pid
        else:
            f.undo["pid"] = lab.kill_switch(f.target[0])
    else:
        if len(f.target) != 2 or not f.target[1].isdigit():
            raise FaultError("host-nic-down needs HOST PLANE")
        from mininet_labs.labstate import LabError

        try:
            host = lab.host(f.target[0])
            f.undo["kept"] = _snapshot(host.argv, host.nic(int(f.target[1])).intf)
            f.undo["intf"] = lab.host_nic(f.target[0], int(f.target[1]), "down")
        except (LabError, LookupError, IndexError) as e:
            raise FaultError(str(e)) from None


def _switch(lab: Any, name: str) -> dict[str, Any]:
    if name not in lab.state.switches:
        raise FaultError(f"unknown switch '{name}' (switches: {', '.join(sorted(lab.state.switches))})")
    return lab.state.switches[name]


def undo(lab: Any, kind: str, target: list[str]) -> Fault:
    """Undo the active fault of that kind on that target; FaultError when there is none."""
    key = (kind, tuple(str(t) for t in target))
    with _locked(lab.dir) as faults:
        f = next((f for f in faults if f.key == key), None)
        if f is None:
            raise FaultError(f"no {kind} on {' '.join(target)} is active (active: "
                             f"{'; '.join(x.describe() for x in faults) or 'none'})")
        _undo(lab, f)
        faults.remove(f)
    return f


def _snapshot(wrap: linkroutes.Wrap, intf: str) -> dict[str, Any]:
    """What the port's namespace holds through `intf` and loses when it goes down (linkroutes), for the undo."""
    try:
        return linkroutes.snapshot(wrap, intf).to_json()
    except linkroutes.LinkRoutesError as e:
        raise FaultError(f"keeping the routes through {intf}: {e}") from None


def _put_back(wrap: linkroutes.Wrap, f: Fault) -> None:
    """The routes and neighbours the port's namespace lost while the fault held it down, back (the kernel does not
    put them back when the port comes up)."""
    if "kept" not in f.undo:  # a record written before faults kept them
        return
    try:
        linkroutes.restore(wrap, linkroutes.Kept.from_json(f.undo["kept"]))
    except linkroutes.LinkRoutesError as e:
        raise FaultError(f"putting back the routes through {f.undo['kept'].get('intf')}: {e}") from None


def _undo(lab: Any, f: Fault) -> None:
    intf, ns = str(f.undo.get("intf")), f.undo.get("netns")
    in_port_ns: linkroutes.Wrap = lambda argv: _in(ns, argv)  # noqa: E731
    if f.kind == "carrier-down":
        _run("ip", "link", "set", intf, "up", netns=ns)
        _put_back(in_port_ns, f)
    elif f.kind in ("blackhole", "gray"):
        _quiet("nft", "delete", "table", "netdev", f.undo["nft_table"], netns=ns)
    elif f.kind == "slow":
        _quiet("tc", "qdisc", "del", "dev", intf, "root", netns=ns)
    elif f.kind == "flap":
        _stop(f.undo.get("pid"))
        _quiet("ip", "link", "set", intf, "up", netns=ns)
        _put_back(in_port_ns, f)
    elif f.kind == "freeze":
        _cont(f.undo.get("pid"))
    elif f.kind == "kill":
        from mininet_labs.labstate import LabError

        try:
            lab.restart_switch(f.target[0])
        except LabError as e:
            raise FaultError(str(e)) from None
    elif f.kind == "host-nic-down":
        lab.host_nic(f.target[0], int(f.target[1]), "up")
        _put_back(lab.host(f.target[0]).argv, f)


def clear(lab: Any) -> list[Fault]:
    """Undo every active fault of a running lab (the last injected first); the ones undone."""
    done = []
    with _locked(lab.dir) as faults:
        for f in reversed(list(faults)):
            _undo(lab, f)
            faults.remove(f)
            done.append(f)
    return done


def clear_remains(lab_dir: str | os.PathLike[str]) -> list[Fault]:
    """What `lab down` does before stopping the lab: thaw frozen switches (a stopped process takes no
    SIGTERM), stop flappers, delete our nftables tables and qdiscs; the record goes. Interfaces and
    processes go with the lab."""
    faults = active(lab_dir)
    for f in faults:
        ns = f.undo.get("netns")
        if f.kind == "freeze":
            _cont(f.undo.get("pid"))
        elif f.kind == "flap":
            _stop(f.undo.get("pid"))
        elif f.kind in ("blackhole", "gray"):
            _quiet("nft", "delete", "table", "netdev", f.undo["nft_table"], netns=ns)
        elif f.kind == "slow" and f.undo.get("intf"):
            _quiet("tc", "qdisc", "del", "dev", f.undo["intf"], "root", netns=ns)
    _path(lab_dir).unlink(missing_ok=True)
    _path(lab_dir).with_suffix(".lock").unlink(missing_ok=True)
    return faults


def _cont(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def _stop(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        end = time.monotonic() + 5
        while time.monotonic() < end:
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:  # not our child: wait for /proc to lose it
                if not Path(f"/proc/{pid}").exists():
                    return
            time.sleep(0.02)


def flap(intf: str, period_ms: int, kept: linkroutes.Kept | None = None) -> None:
    """Down for a period, up for a period, until SIGTERM (then left up); each time up, what the namespace held
    through the port (`kept`) put back, as a switch keeps its routes through a flapping link."""
    stop = False

    def put_back() -> None:
        if kept is not None:
            try:
                linkroutes.restore(list, kept)
            except (linkroutes.LinkRoutesError, subprocess.SubprocessError):
                pass  # the port went down again meanwhile: the next up tries again, and so does the undo

    def on_term(*_: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    state = "down"
    while not stop:
        start = time.monotonic()
        subprocess.run(["ip", "link", "set", intf, state], capture_output=True)
        if state == "up":
            put_back()
        state = "up" if state == "down" else "down"
        time.sleep(max(0.0, period_ms / 1000 - (time.monotonic() - start)))
    subprocess.run(["ip", "link", "set", intf, "up"], capture_output=True)
    put_back()


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "flap":
    given = sys.stdin.read() if not sys.stdin.isatty() else ""
    flap(sys.argv[2], int(sys.argv[3]), linkroutes.Kept.from_json(json.loads(given)) if given.strip() else None)
