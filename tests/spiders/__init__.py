"""Spiders used only by tests (``-s SPIDER_MODULES=crawler.spiders,tests.spiders``)."""
