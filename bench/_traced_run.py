"""`fabricctl run` under tracemalloc for bench/service_rss.py --trace: argv is FILE EVERY then fabricctl's own;
every EVERY seconds the 15 allocation sites (3 frames) that grew most since the first snapshot go to FILE."""

from __future__ import annotations

import json
import sys
import threading
import time
import tracemalloc
from pathlib import Path


def watch(out: Path, every: float) -> None:
    first = tracemalloc.take_snapshot()
    start = time.monotonic()
    while True:
        time.sleep(every)
        snap = tracemalloc.take_snapshot()
        top = snap.compare_to(first, "traceback")[:15]
        traced, peak = tracemalloc.get_traced_memory()
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"t_s": round(time.monotonic() - start, 1), "traced_kb": traced // 1024,
                                "peak_kb": peak // 1024,
                                "top": [{"kb": s.size_diff // 1024, "count": s.count_diff,
                                         "where": [f"{fr.filename.rsplit('/', 2)[-1]}:{fr.lineno}" for fr in s.traceback]}
                                        for s in top]}) + "\n")


def main() -> None:
    out, every = Path(sys.argv[1]), float(sys.argv[2])
    tracemalloc.start(3)
    threading.Thread(target=watch, args=(out, every), name="tracemalloc", daemon=True).start()
    sys.argv = ["fabricctl", *sys.argv[3:]]
    from fabricctl.main import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
