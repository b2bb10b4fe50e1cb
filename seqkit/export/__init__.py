"""Export trained runs for serving (SavedModel) and for phones (TFLite / LiteRT step models)."""
