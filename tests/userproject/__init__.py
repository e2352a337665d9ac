"""Code a user brings: ordinary Scrapy and scrapy-redis-style spiders, pipelines and middlewares.

Written the way their users write them, not the way our own spiders are, so that the
conformance tests check our guarantees against code that does not share our assumptions.
Every spider takes ``-a site=<base URL of tests.user_site.UserSite>``.
"""
