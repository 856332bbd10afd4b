"""`fabricctl web`: serve the live view of the fabric (the running controller's status and events) in a browser."""

from __future__ import annotations

import errno
import signal
import threading
from pathlib import Path
from typing import Any

import click

from controller.exitcodes import BAD_INPUT, OpError
from controller.service.web.server import ListenError, WebServer, parse_listen
from controller.service.runner import EVENTS_NAME
from controller.service.web.view import Sources
from controller.state.backends import open_store
from controller.state.store import StoreError, Unreachable
from fabricctl.options import MAX_SECONDS, Finite

DEFAULT_LISTEN = "127.0.0.1:9400"


@click.command("web")
@click.option("--listen", default=DEFAULT_LISTEN, show_default=True, metavar="HOST:PORT",
              help="Address to serve on ([V6]:PORT for IPv6; port 0: any free port). Loopback unless --allow-remote.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --listen: anyone who reaches it sees the fabric (the page stays read-only).")
@click.option("--events", "events_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help=f"Events file [default: the running controller's, else {EVENTS_NAME} next to the state file].")
@click.option("--duration", type=Finite(min=0, max=MAX_SECONDS), default=0.0, metavar="SECONDS",
              help="Stop after this long (0: until Ctrl-C or SIGTERM).")
@click.pass_obj
def web(env: Any, listen: str, allow_remote: bool, events_file: Path | None, duration: float) -> None:
    """Serve a live, read-only view of the fabric in the browser.

    One page: the fabric drawn plane by plane, each link and host port up or failed (and who
    recorded the failure: operator or detector), the running controller's probe health and per-path
    packet rates, what the failures make unreachable, and the controller's events as they happen.
    It reads the fabric's store: the state file, the status file 'fabricctl run' publishes beside
    it and its events file, or with --store etcd://... the record, the leader's view and every
    controller's events in etcd. It writes nothing and needs no switch.

    \b
    Examples:
      fabricctl web                            # http://127.0.0.1:9400/
      fabricctl web --listen 127.0.0.1:0       # any free port (printed)
      fabricctl web --listen 0.0.0.0:9400 --allow-remote
      fabricctl --store etcd://10.0.0.1:2379,10.0.0.2:2379 web
    """
    if env.store_url and events_file is not None:
        raise OpError("--events names an events file: with --store etcd:// the view reads every controller's "
                      "events from etcd", BAD_INPUT)
    sources = view_sources(env, events_file)
    if sources.store is not None:
        try:  # a store nobody answers for is a wrong address (a store without quorum is shown, with why)
            sources.store.last_known(sources.topo)
        except Unreachable:
            sources.store.close()
            raise
        except StoreError:  # a record that cannot be read: the page says why
            pass
    server = open_server(sources, listen, allow_remote)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    click.echo(announce(server) + "; Ctrl-C stops")
    try:
        stop.wait(duration if duration > 0 else None)
    finally:
        server.close()


def view_sources(env: Any, events_file: Path | None) -> Sources:
    """What the view reads: the configured store (--store etcd://..., a client of its own), else the state
    file with the status and events files beside it (OpError with one line when its directory is missing)."""
    topo = env.topo()
    state = env.state_path()
    if env.store_url:
        return Sources(topo, env.program, state.absolute(), None,
                       open_store(env.store_url, None, topo.name, timeout=env.timeout))
    if not state.parent.is_dir():
        raise OpError(f"no state directory {state.parent} (the state file {state.name} lives there: "
                      "give --state or --topology)", BAD_INPUT)
    return Sources(topo, env.program, state.absolute(), events_file and events_file.absolute())


def open_server(sources: Sources, listen: str, allow_remote: bool, option: str = "--listen") -> WebServer:
    """The live view's server bound to `listen` (not started); OpError with one line when it cannot be."""
    try:
        host, port = parse_listen(listen)
        return WebServer(sources, host, port, allow_remote)
    except ListenError as e:
        raise OpError(str(e).replace("--listen", option), BAD_INPUT) from None
    except OSError as e:
        why = f"address already in use (another fabricctl web? choose another {option} port)" \
            if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        raise OpError(f"cannot listen on {listen}: {why}", BAD_INPUT) from None


def announce(server: WebServer) -> str:
    """The line that says where the view is and who can open it."""
    where = "loopback only: this machine alone can open it" if server.loopback_only else \
        "NOT loopback: reachable from other machines (--allow-remote)"
    return f"fabric view: {server.url} ({where}); read-only"
