"""seqkit benchmarks (measurements, not tests): ``python -m bench --suite train|stream|decode|data|scale``; the results tables (docs/results.md) from run directories: ``python -m bench.tables``."""
