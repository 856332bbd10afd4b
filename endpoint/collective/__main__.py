import sys

from endpoint.collective.rank import main

sys.exit(main())
