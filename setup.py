"""Maps the repository's top-level folders onto the `patterns` namespace.

pyproject.toml cannot compute a package list under a renamed root, so this file
walks each folder and declares every sub-package as `patterns.<folder>.<...>`.
Editable installs (`pip install -e .`) honour the mapping through setuptools'
import finder.
"""
from pathlib import Path

from setuptools import setup

ROOTS = {
    "patterns": "patterns",
    "patterns.distill": "distill",
    "patterns.retriever": "retriever",
    "patterns.rewriter": "rewriter",
    "patterns.kernels": "kernels",
    "patterns.serving": "serving",
    "patterns.validation": "validation",
}
HERE = Path(__file__).parent


def _packages():
    package_dir, packages = {}, []
    for name, folder in ROOTS.items():
        root = HERE / folder
        package_dir[name] = folder
        for init in sorted(root.rglob("__init__.py")):
            rel = init.parent.relative_to(root)
            if "library" in rel.parts[:1] and name == "patterns":
                continue  # pattern folders are data, shipped as package data
            pkg = ".".join((name, *rel.parts))
            packages.append(pkg)
            package_dir[pkg] = str(Path(folder, *rel.parts))
    return package_dir, packages


package_dir, packages = _packages()
setup(
    package_dir=package_dir,
    packages=packages,
    package_data={
        "patterns": ["library/**/*", "catalog/templates/*", "catalog_templates/*", "skill_templates/*", "py.typed"],
        "patterns.kernels": ["**/*.md"],
        "patterns.rewriter": ["templates/**/*"],
        "patterns.serving": ["native/*.c"],
    },
)
