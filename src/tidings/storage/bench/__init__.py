"""Storage for the benchmarks only: scratch databases and synthetic audiences."""
