"""Run records: HTTP end-to-end benchmark runs kept as evidence."""
