"""The ``crawler`` command: operator tools for a running cluster."""
