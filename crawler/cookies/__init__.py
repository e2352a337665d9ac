"""Scrapy's cookie jars shared by a crawl's nodes in Redis (``crawler.cookies.jar_store``)."""
