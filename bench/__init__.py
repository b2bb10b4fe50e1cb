"""seqkit benchmarks (measurements, not tests): ``python -m bench --suite train|stream|decode|data|scale``; README's results tables from run directories: ``python -m bench.tables``."""
