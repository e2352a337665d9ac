"""Scrapy extensions of the crawler nodes (one component per module)."""
