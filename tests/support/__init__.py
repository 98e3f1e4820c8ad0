"""What the test modules share: plain functions and data, imported as ``tests.support.<module>``.

Fixtures live in tests/conftest.py; no test module imports another.
"""
