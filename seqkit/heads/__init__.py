"""Task heads (registry ``seqkit.heads``)."""
