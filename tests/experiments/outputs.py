"""Helpers of the experiment tests: read a markdown table back, snapshot the files of a workdir."""

from pathlib import Path


def markdown_table(text: str, header_start: str) -> list[list[str]]:
    """The body rows (cells stripped) of the first markdown table whose header row starts with `header_start`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def modification_times(workdir: Path, pattern: str = "**/*") -> dict[str, int]:
    """Every file's modification time (ns) under `workdir` matching `pattern`, by relative path."""
    return {str(p.relative_to(workdir)): p.stat().st_mtime_ns for p in workdir.glob(pattern) if p.is_file()}
