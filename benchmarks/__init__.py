"""Benchmarks of inventory-vacuum against its peers, on the local S3 server (see benchmarks/README.md)."""
