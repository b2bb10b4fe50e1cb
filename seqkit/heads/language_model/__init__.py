"""The language-model head and everything it owns: the head (:mod:`.head`), the stream layout's
truncated BPTT (:mod:`.stream`), dynamic evaluation and its statistics cache
(:mod:`.dynamic_eval`, :mod:`.dynamic_stats_cache`) and generation (:mod:`.generate`)."""
