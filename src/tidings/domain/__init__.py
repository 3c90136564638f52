"""The pure core: dataclasses, rules and errors. No frameworks, no I/O, no clock."""
