"""`python3 -m fabricctl`: the fabricctl command."""

from fabricctl.main import main

main()
