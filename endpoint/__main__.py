"""`python3 -m endpoint send|recv`: endpoint-mode traffic inside a lab host (endpoint.host)."""

import sys

from endpoint.host import main

sys.exit(main())
