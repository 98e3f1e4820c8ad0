"""Inventory-driven, gated VACUUM of registered Delta tables."""
