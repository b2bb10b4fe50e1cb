"""seqkit benchmarks (measurements, not tests): ``python -m bench --suite train|stream|decode|data|scale``."""
