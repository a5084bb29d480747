"""Judges: one generic stage (requests -> backend -> parse -> validate -> retry -> record) and its backends."""
