"""`python -m tidings` is the `tidings` command."""

from tidings.cli.main import main

main()
