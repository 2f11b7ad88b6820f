"""qc: quality control of a generated benchmark (AIR-Bench), and the label audit's machinery; the
whole design is in control.py."""
