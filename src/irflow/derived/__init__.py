"""Datasets made from datasets: generated (AIR-Bench), quality-controlled, expanded,
position-controlled, mined negatives, label audits."""
