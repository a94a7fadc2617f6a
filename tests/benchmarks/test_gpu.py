"""benchmarks.gpu: bad arguments exit 2 with one line; rows run in their own processes at smoke sizes on CPU, a row
that runs out of time says so and the next row still runs."""

import json

import pytest

from benchmarks import gpu

FAST_ROWS = "heft-labels"  # seconds at smoke sizes; every row in the slow test


def test_unknown_row_is_one_line_and_exit_2(capsys):
    assert gpu.main(["--rows", "heft-labels,warp-drive"]) == 2
    err = capsys.readouterr().err
    assert "warp-drive" in err and err.count("\n") == 1


def test_more_devices_than_the_machine_has_exit_2(capsys):
    assert gpu.main(["--rows", "sharded-sweep", "--devices", "4096"]) == 2
    assert "--devices 4096" in capsys.readouterr().err


def _smoke(tmp_path, *args):
    out = tmp_path / "gpu.json"
    code = gpu.main(["--smoke", "--out", str(out), *args])
    return code, json.loads(out.read_text())


def test_smoke_rows_give_figures(tmp_path):
    code, table = _smoke(tmp_path, "--rows", FAST_ROWS)
    rows = table["rows"]
    assert list(rows) == FAST_ROWS.split(",")
    for row in rows.values():
        assert row["verdict"] in ("met", "not met", "-"), row
        assert row["device"].startswith("cpu") and row["jax"]
    assert rows["heft-labels"]["equal"] is True  # the batched schedules equal the NumPy reference's
    assert code == 0


def test_a_row_out_of_time_says_so_and_the_next_goes_on(tmp_path):
    code, table = _smoke(tmp_path, "--rows", "quant-sweep,dream", "--row-timeout", "5")
    assert table["rows"]["quant-sweep"]["verdict"] == "timed out"
    assert table["rows"]["quant-sweep"]["figure"] == "ran out of its 5 s"
    assert "dream" in table["rows"]
    assert code == 1


@pytest.mark.slow
def test_every_row_runs_at_smoke_sizes(tmp_path):
    code, table = _smoke(tmp_path, "--budget", "3000")
    assert list(table["rows"]) == list(gpu.ROWS)
    failed = {name: row for name, row in table["rows"].items() if row["verdict"] not in ("met", "not met", "-")}
    assert not failed and code == 0, failed
