"""Runs to numbers: scores, the results database, significance, cost."""
