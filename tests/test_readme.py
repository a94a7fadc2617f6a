"""Every Python example of README.md runs as a script on a fresh interpreter (slow: about 3 minutes)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_examples():
    assert len(EXAMPLES) >= 5


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(EXAMPLES)))
def test_readme_example_runs(index, tmp_path):
    script = tmp_path / f"example{index}.py"
    script.write_text(EXAMPLES[index])
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, f"README example {index} failed:\n{EXAMPLES[index]}\n{done.stderr[-3000:]}"
