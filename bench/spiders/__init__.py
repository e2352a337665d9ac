"""Baseline spiders the benchmarks compare against."""
