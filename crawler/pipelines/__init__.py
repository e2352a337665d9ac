"""Item pipelines of the crawler."""
