"""`python -m kubedra` runs the `kubedra` command."""

from kubedra.cli.main import main

main()
