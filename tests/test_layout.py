"""Sizes that keep the package and its tests readable: no module over 500 lines, no
folder over 16 modules (a bigger one is split by concern, the tests as the package)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "forge"
TESTS = Path(__file__).resolve().parent
MAX_LINES = 500
MAX_MODULES = 16


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, f"split these by concern (at most {MAX_LINES} lines): {long}"


def test_no_folder_holds_over_16_modules() -> None:
    crowded = {
        str(d.relative_to(PACKAGE.parent)): n
        for d in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if (n := sum(1 for m in d.glob("*.py") if m.name != "__init__.py")) > MAX_MODULES
    }
    assert crowded == {}, f"split these folders (at most {MAX_MODULES} modules): {crowded}"


def test_no_test_folder_holds_over_16_test_modules() -> None:
    crowded = {
        str(d.relative_to(TESTS.parent)): n
        for d in [TESTS, *(p for p in TESTS.rglob("*") if p.is_dir())]
        if (n := sum(1 for _ in d.glob("test_*.py"))) > MAX_MODULES
    }
    assert crowded == {}, f"split these test folders (at most {MAX_MODULES} modules): {crowded}"


def test_every_package_is_installed_by_a_regular_install() -> None:
    """`pip install .` (the README's first command) installs the packages pyproject
    lists, not the folders on disk: one left out is a forge that fails to import."""
    import tomllib

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    on_disk = {
        ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        for init in PACKAGE.rglob("__init__.py")
    }
    assert on_disk - listed == set(), (
        f"add these to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    )
