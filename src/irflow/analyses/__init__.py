"""Analyses over evaluated systems: correlation, position, saliency, plots."""
