"""Spiders. ``RedisSpider`` (in ``base``) is the class to subclass for new spiders."""
