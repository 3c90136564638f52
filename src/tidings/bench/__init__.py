"""The benchmarks behind `tidings bench`: each measures tidings beside a bare yardstick in the
same run and returns JSON-able figures. Only the command line imports this package; its
processes (`bare_process`, the queue workers) run as `python -m tidings.bench.…`, so this
file imports nothing."""
