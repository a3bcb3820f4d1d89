"""Local fakes of provider APIs for tests (no network beyond 127.0.0.1)."""
