"""JSON Schemas of the item types (one file per item_type)."""
