"""The shared Redis frontier: seeds, request encoding and keys."""
