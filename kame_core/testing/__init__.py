"""Test doubles and scripted sessions, shared by ``tests/`` and ``benchmarks/`` (neither imports the other).

Nothing here is used by the app; every trace it makes carries ``test-double`` provenance."""
