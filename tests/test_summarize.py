"""launch/summarize.py groups runs by a config value and reports mean and spread."""

import json
from pathlib import Path

from tests.forked_python import run_python

ROOT = Path(__file__).resolve().parents[1]


def fake_run(path: Path, mode: str, returns: list[float]):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"env": {"name": "ant"}, "smoothing": {"mode": mode}}))
    lines = [
        json.dumps({"epoch": i + 1, "env_steps": 2048 * (i + 1), "wall_time_s": 10.0 * (i + 1), "eval/mean_return": r})
        for i, r in enumerate(returns)
    ]
    lines.insert(1, json.dumps({"epoch": 1, "env_steps": 2048, "wall_time_s": 10.0, "eval/mean_return": None}))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_summary_table_and_figure(tmp_path):
    fake_run(tmp_path / "a", "none", [1.0, 3.0])
    fake_run(tmp_path / "b", "none", [2.0, 5.0])
    fake_run(tmp_path / "c", "soft", [4.0, 6.0])
    result = run_python("launch/summarize.py", str(tmp_path), "group_by=smoothing.mode", timeout=120)
    assert result.returncode == 0, result.stderr
    # none: finals 3 and 5 -> 4.0 ± 1.0; soft: one run, 6.0 ± 0.0; 2 records -> 4,096 steps, 20 s
    # medians: a [1, 3] -> 2, b [2, 5] -> 3.5: 2.75 ± 0.75; c [4, 6] -> 5
    assert "| none | 2 | 4,096 | 20 | 4.0 ± 1.0 | 4.0 ± 1.0 | 2.75 ± 0.75 |" in result.stdout
    assert "| soft | 1 | 4,096 | 20 | 6.0 ± 0.0 | 6.0 ± 0.0 | 5.00 ± 0.00 |" in result.stdout
    assert (tmp_path / "summary.png").stat().st_size > 1000
    assert (tmp_path / "summary.md").read_text().startswith("| smoothing.mode |")


def test_unknown_key_is_named(tmp_path):
    fake_run(tmp_path / "a", "none", [1.0])
    result = run_python("launch/summarize.py", str(tmp_path), "group_by=algo.horizon", timeout=120)
    assert result.returncode != 0 and "config key 'algo.horizon' not found" in result.stderr


def test_group_by_run_gives_each_folder_a_row_and_other_metrics_their_own_files(tmp_path):
    fake_run(tmp_path / "lever_a" / "seed0", "none", [1.0, 3.0])
    fake_run(tmp_path / "lever_a" / "seed1", "soft", [2.0, 5.0])
    fake_run(tmp_path / "lever_b", "none", [4.0, 6.0])
    result = run_python("launch/summarize.py", str(tmp_path), "group_by=run", timeout=120)
    assert result.returncode == 0, result.stderr
    # lever_a: both seeds whatever their configs, finals 3 and 5 -> 4.0 ± 1.0; lever_b alone
    assert "| lever_a | 2 | 4,096 | 20 | 4.0 ± 1.0 | 4.0 ± 1.0 | 2.75 ± 0.75 |" in result.stdout
    assert "| lever_b | 1 | 4,096 | 20 | 6.0 ± 0.0 | 6.0 ± 0.0 | 5.00 ± 0.00 |" in result.stdout
    for run in (tmp_path / "lever_a" / "seed0", tmp_path / "lever_b"):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        (run / "metrics.jsonl").write_text(
            "\n".join(line.replace("eval/mean_return", "reward/forward") for line in lines)
        )
    result = run_python("launch/summarize.py", str(tmp_path), "group_by=run", "metric=reward/forward", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "| lever_a | 1 | 4,096 | 20 | 3.0 ± 0.0 | 3.0 ± 0.0 | 2.00 ± 0.00 |" in result.stdout
    assert (tmp_path / "summary_reward_forward.md").read_text().startswith("| run | runs |")
    assert (tmp_path / "summary_reward_forward.png").is_file() and (tmp_path / "summary.md").is_file()
