"""Cluster-wide politeness: one rate limit per site, shared by every node."""
