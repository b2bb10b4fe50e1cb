"""Layers shared by heads: the recurrent encoder stack, masking helpers."""
