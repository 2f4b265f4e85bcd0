"""Benchmarks that ship with the product: measured side by side in one run, reported as ratios."""
