"""odradek's benchmarks: ``python -m bench [--quick] [--only NAME]`` (see bench/README.md)."""
