"""The local demo: a generated site, crawler nodes as processes, and the ``make demo`` run."""
