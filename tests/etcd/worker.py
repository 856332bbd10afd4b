"""One process of the concurrency test: runs its fail/restore commands through fabricctl (in this
process, one CLI invocation each) against the store in FABRIC_STORE; prints one JSON line."""

from __future__ import annotations

import json
import sys

from click.testing import CliRunner

from fabricctl.main import cli


def main(commands: list[list[str]]) -> int:
    runner = CliRunner()
    bad = []
    for argv in commands:
        result = runner.invoke(cli, [*argv, "--no-apply"], catch_exceptions=False)
        if result.exit_code != 0:
            bad.append({"argv": argv, "code": result.exit_code, "out": result.output[-300:]})
    print(json.dumps({"ran": len(commands), "bad": bad}))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
