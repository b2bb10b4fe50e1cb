"""Data sources (registry ``seqkit.data``), vocabularies and tf.data pipelines."""
