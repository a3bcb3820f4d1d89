"""tools/pip_install.py: pip's own configuration handed to uv, which `make install` runs."""
from __future__ import annotations

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("pip_install", Path(__file__).resolve().parents[1] / "tools" /
                                              "pip_install.py")
assert spec is not None and spec.loader is not None
pip_install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pip_install)

LISTED = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.index-url=''
"""


def test_pips_indexes_links_constraints_and_certificate_are_read_from_its_config_listing() -> None:
    settings = pip_install.pip_settings(LISTED)
    assert settings["extra-index-url"] == ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]
    assert settings["find-links"] == ["/opt/wheels"] and settings["cert"] == ["/etc/ssl/certs/ca-certificates.crt"]
    assert settings["index-url"] == [] and settings["default-timeout"] == ["180"]


def test_uv_gets_every_index_link_and_constraint_and_pips_best_match_rule() -> None:
    arguments = pip_install.uv_arguments(pip_install.pip_settings(LISTED))
    assert arguments == ["--index-strategy", "unsafe-best-match", "--compile-bytecode",
                         "--extra-index-url", "file:///opt/pypi/simple",
                         "--extra-index-url", "file:///opt/pypi-more/simple",
                         "--find-links", "/opt/wheels", "--constraint", "/etc/xdg/pip/constraints.txt"]
    assert pip_install.uv_arguments({}) == ["--index-strategy", "unsafe-best-match", "--compile-bytecode"]
