"""Trace files -> typed tables: read and gunzip, decode the JSON (C decoder or msgspec), build one
table per event family, link rows (steps, launches, op tree), cache as Arrow IPC; the loader
parses a folder's ranks in worker processes."""
