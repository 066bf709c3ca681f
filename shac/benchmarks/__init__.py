"""Benchmarks against the peers: the budget clock, the learning and throughput suites, their reports."""
