"""Workloads and reports shared by `bench`, `ladder` and the benchmark suite."""
