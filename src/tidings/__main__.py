"""`python -m tidings` is the `tidings` command."""

from tidings.launch import main

main()
