"""Downloader and spider middlewares of the crawler (sessions and politeness live here)."""
