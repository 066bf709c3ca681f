"""Benchmarks against the peers: the budget clock, the learning and throughput suites, their reports.

May import what `shac.tools` may (see its docstring).
"""
