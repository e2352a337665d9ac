"""Distributed Scrapy crawler: nodes share a Redis frontier and stream items into Kafka."""
