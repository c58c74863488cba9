"""The three places that name dependency versions must agree; the environment the tests give
the processes they start."""

import os
import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
AT_IMPORT = dict(os.environ)  # what a module that copies the environment when imported gets


def test_a_module_imported_by_the_tests_sees_the_sessions_environment(tmp_path_factory):
    """conftest.pytest_sessionstart sets the grader's environment before any test module is
    imported: a copy of os.environ made at import (tests/test_any_course.py once made one) keeps
    the tests' calibration cache (never the developer's ~/.cache) and the pinned pace."""
    assert AT_IMPORT.get("AUTOGRADER_LOAD") == "0"
    cache = Path(AT_IMPORT.get("AUTOGRADER_CACHE", "~")).resolve()
    assert cache.is_relative_to(tmp_path_factory.getbasetemp().resolve()), cache


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)\s*==\s*([^\s;]+)", line)
        assert match, f"not an exact pin: {line!r}"
        pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def pyproject_pins():
    """Every direct dependency: the project's and its extras' (`dev`: the lint and type tools)."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    extras = data["project"].get("optional-dependencies", {}).values()
    return _pins([*data["project"]["dependencies"], *(line for group in extras for line in group)])


def environment_pins():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip section"
    return _pins(pip_sections[0])


def lock_pins():
    return _pins((REPO / "requirements.lock").read_text().splitlines())


def test_every_direct_dependency_is_pinned_exactly():
    pins = pyproject_pins()
    assert pins["torch"] == "2.13.0"
    assert pins["nbgrader"] == "0.9.6"


def test_environment_yml_names_the_same_versions_as_pyproject():
    assert environment_pins() == pyproject_pins()


def test_environment_yml_uses_conda_forge_and_python_311():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    assert "python=3.11" in env["dependencies"]


def test_lock_agrees_with_pyproject():
    lock = lock_pins()
    for name, version in pyproject_pins().items():
        assert lock.get(name) == version, (
            f"requirements.lock pins {name}=={lock.get(name)}, pyproject {version}"
        )


def test_installed_versions_match_the_lock():
    from importlib.metadata import version

    for name, pinned in pyproject_pins().items():
        installed = version(name).split("+")[0]
        assert installed == pinned, (
            f"{name}: installed {installed}, pinned {pinned} (run `make venv`)"
        )


def test_reading_a_notebook_builds_no_iri_grammar():
    """jsonschema 4.25+ imports rfc3987-syntax, which builds an Earley parser for RFC 3987 at
    import: 1.4 s of CPU (2026-12-07, this machine) in every process that imports nbformat -
    every `autograder grade`, `autograder check`, nbgrader command and `alembic` run nbgrader
    starts. pyproject.toml holds jsonschema at 4.24.1, which has no such import; this fails the
    day an upgrade brings it back."""
    import subprocess
    import sys

    probe = (
        "import sys, nbformat, nbgrader.apps.autogradeapp; "
        "print(sorted(m for m in ('rfc3987_syntax', 'lark') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", out


def test_the_workers_first_modules_exist():
    """tests/conftest.py's FIRST orders make test's modules by measured worker-seconds; a name
    that no longer exists (a module renamed or split) would order nothing, silently."""
    from conftest import FIRST

    missing = [name for name in FIRST if not (REPO / name).is_file()]
    assert not missing, missing
