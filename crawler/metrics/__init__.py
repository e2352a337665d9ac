"""What a node exports to Prometheus, without Scrapy: histograms, cluster gauges, the server.

``crawler.extensions.metrics`` wires these to a crawler (docs/metrics.md lists every metric).
"""
