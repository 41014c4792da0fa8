"""Thin adapters, one module per resource family: InputSerializer → service → OutputSerializer."""
