"""Sweeps with Hydra's launchers: a local multirun of the toy env, and the SLURM launcher's config."""

import json
from pathlib import Path

from hydra import compose, initialize_config_dir

from shac.run.hydra_config import register_configs
from tests.conftest import run_cli

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
register_configs()


def test_multirun_writes_a_run_per_seed_in_one_wandb_group_and_summarize_aggregates_them(tmp_path):
    sweep = tmp_path / "sweep"
    run_cli("-m", "tests.toy_train", "-m", "seed=0,1", f"hydra.sweep.dir={sweep}")
    runs = sorted(path.parent for path in sweep.glob("*/metrics.jsonl"))
    assert [run.name for run in runs] == ["0_seed=0", "1_seed=1"]  # <job number>_<the swept overrides>
    configs = [json.loads((run / "config.json").read_text()) for run in runs]
    assert [c["seed"] for c in configs] == [0, 1]
    assert [c["logger"]["group"] for c in configs] == ["sweep", "sweep"]  # the sweep directory's name
    for run in runs:
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["epoch"] for r in records] == [1, 2]
    summary = run_cli("launch/summarize.py", str(sweep))
    assert "| line | 2 | 32 |" in summary  # both seeds in one row: 2 epochs x 4 envs x 4 steps
    assert (sweep / "summary.png").stat().st_size > 1000


def test_slurm_launcher_composes_with_defaults_and_overrides():
    with initialize_config_dir(config_dir=str(CONFIGS), version_base=None):
        cfg = compose(
            config_name="config",
            overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu", "hydra.launcher.gpus_per_node=4"],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert (launcher.partition, launcher.gpus_per_node) == ("gpu", 4)
    assert (launcher.nodes, launcher.tasks_per_node, launcher.timeout_min) == (1, 1, 720)
    assert launcher.array_parallelism == 16
    assert launcher.submitit_folder.endswith("/.submitit/%j")  # in the sweep directory
