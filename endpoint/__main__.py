"""`python3 -m endpoint send|recv|loops`: endpoint-mode traffic (endpoint.host) and the loop-probing agent
(endpoint.loopprobe) inside a lab host."""

import sys

if sys.argv[1:2] == ["loops"]:
    from endpoint.loopprobe import main as loops

    sys.exit(loops(sys.argv[2:]))

from endpoint.host import main

sys.exit(main())
