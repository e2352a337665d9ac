"""Kafka clients of the crawler (no Scrapy imports): message encoding, producer, reader."""
