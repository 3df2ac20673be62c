"""The package: standard library only, Python 3.9 syntax, declared by pyproject.toml, and a
wheel with everything in it (built offline, where setuptools and wheel are installed)."""

import ast
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

import _support

PACKAGE = Path(_support.PACKAGE)
SOURCE = PACKAGE / "src"


class Packaging(unittest.TestCase):
    def test_it_imports_with_the_standard_library_alone(self):
        # -I -S: no site-packages, no user site, no PYTHON* settings: only the standard library.
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]);"
            "import einsora, einsora.models, einsora.errors;"
            "c = einsora.Client('http://127.0.0.1:1', token='tsk_x');"
            "print(einsora.__version__)"
        )
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", code, str(SOURCE)],
            capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        import einsora

        self.assertEqual(out.stdout.strip(), einsora.__version__)

    def test_the_code_is_python_3_9(self):
        files = list(SOURCE.rglob("*.py")) + list((PACKAGE / "tests").glob("*.py"))
        files.append(PACKAGE / "generate.py")
        for path in files:
            with self.subTest(path=path.name):
                ast.parse(path.read_text(), str(path), feature_version=(3, 9))

    def test_pyproject_declares_the_package(self):
        try:
            import tomllib
        except ImportError:  # Python < 3.11
            self.skipTest("tomllib is Python 3.11's")
        project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())
        meta = project["project"]
        import einsora

        self.assertEqual(meta["name"], "einsora")
        self.assertEqual(meta["version"], einsora.__version__)
        self.assertEqual(meta["dependencies"], [])
        self.assertEqual(meta["requires-python"], ">=3.9")
        self.assertEqual(project["tool"]["setuptools"]["packages"]["find"]["where"], ["src"])
        self.assertTrue((SOURCE / "einsora" / "py.typed").exists())

    def test_the_wheel_holds_the_generated_layer(self):
        try:
            import setuptools  # noqa: F401
            import wheel  # noqa: F401
        except ImportError:
            self.skipTest("building a wheel offline needs setuptools and wheel installed")
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as build:
            # A copy, so the build leaves nothing (build/, *.egg-info) in the source tree.
            subprocess.run(["cp", "-r", f"{PACKAGE}/.", build], check=True)
            done = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--no-index", "--disable-pip-version-check", "-q", "-w", out, build],
                capture_output=True, text=True, timeout=300,
                env={**os.environ, "PIP_NO_INDEX": "1"},
            )
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            (wheel_file,) = Path(out).glob("einsora-*.whl")
            names = zipfile.ZipFile(wheel_file).namelist()
        for name in ("einsora/__init__.py", "einsora/_generated/models.py",
                     "einsora/_generated/operations.py", "einsora/py.typed"):
            self.assertIn(name, names)
        self.assertFalse([n for n in names if n.startswith("tests/") or n.endswith("generate.py")])


if __name__ == "__main__":
    unittest.main()
