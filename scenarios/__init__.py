"""Bundled scenario files (*.kame), their question set (bundled.json) and the script that re-records them."""
