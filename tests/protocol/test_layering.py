"""The protocol layer belongs to neither side, as franz-go's client (kgo) and fake broker
(kfake) share its codecs (kmsg) and neither imports the other: nothing under
``mirror/broker/`` imports ``mirror/kafka/``, and ``mirror/protocol/`` imports no other part
of ``mirror``. Read from the sources with ``ast``, so a new import
anywhere (not only on the paths a test happens to run) is caught."""

from __future__ import annotations

import ast
from pathlib import Path

import mirror

MIRROR = Path(mirror.__file__).parent


def _imported(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports, relative imports resolved."""
    package = ".".join(path.relative_to(MIRROR.parent).parts[:-1])  # a module's, or an __init__'s own
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _offenders(folder: str, forbidden) -> dict[str, list[str]]:
    found = {}
    for path in sorted((MIRROR / folder).rglob("*.py")):
        bad = sorted(name for name in _imported(path) if forbidden(name))
        if bad:
            found[str(path.relative_to(MIRROR))] = bad
    return found


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_nothing_under_the_broker_imports_the_client():
    assert _offenders("broker", lambda name: _under(name, "mirror.kafka")) == {}


def test_the_protocol_layer_imports_no_other_part_of_mirror():
    assert _offenders("protocol", lambda name: _under(name, "mirror") and not _under(name, "mirror.protocol")) == {}


def test_the_check_sees_relative_imports():
    """The broker's handlers import the protocol layer relatively: resolved, not missed."""
    assert "mirror.protocol" in _imported(MIRROR / "broker" / "handlers" / "produce.py")
