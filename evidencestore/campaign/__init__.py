"""Campaigns: protocols frozen before results, verdicts, speedup claims, status."""
