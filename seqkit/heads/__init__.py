"""Task heads (registry ``seqkit.heads``): the contract in :mod:`seqkit.heads.base`, one module
(or package) per built-in head."""

#: ``head.type`` when a recipe names none.
DEFAULT_HEAD = "language_model"
