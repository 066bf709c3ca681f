"""The benchmarks: budget clock, summary arithmetic, a peer stopped by its budget, the budget schedule,
the throughput CLI."""

import dataclasses
import itertools
import json
import re

import pytest

import envs
from shac.tools.benchmarks import report
from shac.tools.benchmarks.clock import BudgetClock
from shac.tools.benchmarks.config import PPOConfig
from shac.tools.benchmarks.learning import retime, train_ppo
from shac.tools.benchmarks.throughput import median_seconds
from tests.conftest import run_cli


def benchmark_config(*overrides):
    """`configs/benchmark.yaml` composed with `overrides` as launch/benchmark.py composes it."""
    from hydra import compose, initialize_config_dir

    from launch.benchmark import ROOT
    from shac.run.hydra_config import to_config
    from shac.tools.benchmarks.config import BenchmarkConfig

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        return to_config(compose("benchmark", overrides=list(overrides)), BenchmarkConfig)


@pytest.mark.parametrize(
    ("overrides", "subject"),
    [
        ([], "learning/cartpole_swingup"),
        (["suite=learning", "env=ant"], "learning/ant"),
        (["suite=throughput", "env=hopper"], "throughput/hopper"),
        (["suite=throughput", "throughput.envs=[hopper,ant]"], "throughput/hopper+ant"),
        (["suite=playground", "env=playground"], "playground"),  # its tasks are playground.tasks, not env.name
        (["suite=sysid"], "sysid"),
    ],
)
def test_a_benchmarks_run_directory_is_named_after_what_it_measures(overrides, subject):
    from hydra import compose, initialize_config_dir

    from launch.benchmark import ROOT

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        run_dir = compose("benchmark", overrides=overrides, return_hydra_config=True).hydra.run.dir
    assert re.fullmatch(rf"runs/benchmark/{re.escape(subject)}/\d{{4}}-\d\d-\d\d_\d\d-\d\d-\d\d", run_dir), run_dir


def test_clock_leaves_out_the_first_laps_compile_time():
    clock = BudgetClock(budget_s=16.0)
    clock.laps = [10.0, 6.0]
    assert clock.compile_s is None and not clock.spent()  # never spent before the compile time is known
    clock.laps = [10.0, 6.0, 4.0, 4.0]
    assert clock.counted() == [4.0, 4.0, 4.0, 4.0]  # the first two count as long as the third
    assert clock.compile_s == 8.0  # (10 - 4) + (6 - 4)
    assert clock.elapsed() == 16.0
    assert clock.elapsed(1) == 4.0
    assert clock.spent()
    assert not BudgetClock(budget_s=16.5).spent()
    clock.laps = [10.0, 6.0, 8.0]  # a slow third lap: only the first lap's excess is compilation
    assert clock.compile_s == 2.0 and clock.elapsed() == 22.0  # 8 + 6 + 8
    with pytest.raises(ValueError, match="budget must be > 0"):
        BudgetClock(budget_s=0)


def test_median_seconds_warms_each_call_up_then_alternates_them():
    order = []

    def call(name):
        return lambda x: order.append(name) or x

    seconds = median_seconds({"a": (call("a"), (1.0,)), "b": (call("b"), (2.0,))}, repeats=3)
    assert order == ["a", "b"] * 4  # one warm-up call each, then 3 alternated rounds
    assert seconds.keys() == {"a", "b"} and all(0.0 < s < 1.0 for s in seconds.values())


def test_retime_recomputes_an_older_runs_times_from_its_laps():
    records = [{"env_steps": 10 * k, "wall_time_s": -1.0} for k in range(4)]
    run = retime({"records": records, "compile_s": None, "laps_s": [10.0, 6.0, 4.0]})
    assert [r["wall_time_s"] for r in run["records"]] == [0.0, 4.0, 8.0, 12.0]  # laps counted 4, 4, 4
    assert run["compile_s"] == 8.0


def _record(method, seed, env_steps, wall_time_s, eval_return):
    return {
        "method": method,
        "seed": seed,
        "env_steps": env_steps,
        "wall_time_s": wall_time_s,
        "eval_return": eval_return,
    }


RECORDS = [
    # shac, two seeds, both ending at 100
    *[_record("shac", 0, *r) for r in [(0, 0.0, 0.0), (100, 10.0, 50.0), (200, 20.0, 90.0), (300, 30.0, 100.0)]],
    *[_record("shac", 1, *r) for r in [(0, 0.0, 0.0), (100, 5.0, 40.0), (200, 15.0, 60.0), (300, 25.0, 100.0)]],
    # ppo, one seed, ending at 40
    *[_record("ppo", 0, *r) for r in [(0, 0.0, 0.0), (1000, 10.0, 20.0), (2000, 20.0, 40.0)]],
]


def test_learning_summary_by_hand():
    summary = report.learning_summary(RECORDS)
    # R0 = max(0, 0, 0) = 0; best = shac's mean final (100 + 100) / 2 = 100; thresholds 0 + f * 100
    assert summary["start"] == 0.0 and summary["best"] == 100.0
    assert summary["thresholds"] == {0.5: 50.0, 0.8: 80.0, 0.9: 90.0, "ppo_final": 40.0}
    shac, ppo = summary["methods"]["shac"], summary["methods"]["ppo"]
    assert shac["final_return"] == 100.0 and ppo["final_return"] == 40.0
    # 50: seed 0 at (10 s, 100 steps), seed 1 first at 60 (15 s, 200 steps): means 12.5 s, 150 steps
    assert shac["reach"][0.5] == {"reached": 2, "wall_time_s": 12.5, "env_steps": 150.0}
    # 90: seed 0 at 90 (20 s, 200), seed 1 at 100 (25 s, 300)
    assert shac["reach"][0.9] == {"reached": 2, "wall_time_s": 22.5, "env_steps": 250.0}
    # PPO's final 40: seed 0 at 50 (10 s, 100), seed 1 at 40 (5 s, 100)
    assert shac["reach"]["ppo_final"] == {"reached": 2, "wall_time_s": 7.5, "env_steps": 100.0}
    assert ppo["reach"][0.5]["reached"] == 0 and ppo["reach"]["ppo_final"]["wall_time_s"] == 20.0
    table = report.learning_table(summary)
    # means of the seeds: 80% at (20 + 25) / 2 s and (200 + 300) / 2 steps; trained (30 + 25) / 2 s
    row = "| shac | 2 | 100.0 ± 0.0 | 28 s, 300 steps | 12.5 s | 22.5 s | 22.5 s | 150 | 250 | 250 | 7.5 s | 100 |"
    assert row in table
    assert "| ppo | 1 | 40.0 | 20 s, 2,000 steps | not reached | not reached | not reached |" in table


def test_negative_returns_start_from_the_best_untrained_return():
    records = [_record("a", 0, 0, 0.0, -1000.0), _record("a", 0, 10, 1.0, -600.0), _record("a", 0, 20, 2.0, -200.0)]
    records += [_record("b", 0, 0, 0.0, -5000.0), _record("b", 0, 10, 1.0, -700.0)]
    summary = report.learning_summary(records)
    # R0 = max(-1000, -5000), best = -200: 50% at -1000 + 0.5 * 800 = -600, reached at a's second record
    assert summary["thresholds"][0.5] == -600.0
    assert summary["methods"]["a"]["reach"][0.5]["wall_time_s"] == 1.0
    assert summary["methods"]["b"]["reach"][0.5]["reached"] == 0  # -700 < -600


def test_a_task_where_no_method_beat_its_best_untrained_return_has_no_fractions_to_reach():
    # an untrained policy that scored 40 by chance, and finals of 10 and 0: thresholds 40 + f * (10 - 40) fall
    # below R0, and every later evaluation would "reach" them
    records = [_record("shac", 0, 0, 0.0, 40.0), _record("shac", 0, 10, 1.0, 10.0)]
    records += [_record("ppo", 0, 0, 0.0, 2.0), _record("ppo", 0, 10, 1.0, 0.0)]
    table = report.learning_table(report.learning_summary(records))
    assert "| shac | 1 | 10.0 | 1 s, 10 steps | no gain | no gain | no gain | no gain | no gain | no gain |" in table
    assert table.endswith(
        "R0 = 40.0, above every method's final return (the best 10.0): no method gained on it, "
        "so no fraction of a gain is reached."
    )


def _run(method, config, seed, returns):
    return [{**_record(method, seed, 10 * k, float(k), r), "config": config} for k, r in enumerate(returns)]


def test_each_peers_best_configuration_is_chosen_by_its_first_seeds_final_return():
    records = _run("ppo", "playground", 0, [-1800.0, -5000.0]) + _run("ppo", "lean", 0, [-1800.0, -1400.0])
    records += _run("ppo", "playground", 1, [-1800.0, -100.0])  # another seed: not part of the choice
    records += _run("apg", "brax_defaults", 0, [-1800.0, -1500.0]) + _run("shac", "paper", 0, [-1800.0, -400.0])
    best = report.best_configs(records, seed=0)
    assert best == {"ppo": "lean", "apg": "brax_defaults", "shac": "paper"}
    assert {(r["method"], r["config"]) for r in report.of_configs(records, best)} == {
        ("ppo", "lean"),
        ("apg", "brax_defaults"),
        ("shac", "paper"),
    }
    table = report.configurations_table(records, {"ppo": {"lean": "CPU-sized"}}, best)
    rows = table.splitlines()[2:]
    # the chosen configuration first; final return mean +- std over its seeds: (-5000 - 100) / 2, std 2450
    assert rows[0] == "| ppo | lean | 1 | -1400.0 | -1400.0 | 1 s, 10 steps | 10 | yes | CPU-sized |"
    assert rows[1] == "| ppo | playground | 2 | -2550.0 ± 2450.0 | -100.0 | 1 s, 10 steps | 10 |  |  |"
    summary = report.learning_summary(report.of_configs(records, best))
    assert "| ppo (lean) | 1 | -1400.0 |" in report.learning_table(summary)


def test_peer_configurations_compose_by_name_and_an_empty_peer_is_refused():
    from shac.config import ConfigError
    from shac.tools.benchmarks.config import validate_benchmark

    config = benchmark_config("env=cartpole_swingup", "ppo.lean.learning_rate=1e-3")
    assert list(config.ppo) == ["playground", "brax_example", "brax_example_clipped", "lean"]
    assert list(config.apg) == ["brax_defaults", "lean"]
    clipped, unclipped = config.ppo["brax_example_clipped"], config.ppo["brax_example"]
    assert (clipped.max_grad_norm, unclipped.max_grad_norm) == (1.0, None)
    assert dataclasses.replace(clipped, source=unclipped.source, max_grad_norm=None) == unclipped
    assert isinstance(config.ppo["lean"], PPOConfig) and config.ppo["lean"].learning_rate == 1e-3
    assert config.ppo["lean"].policy_hidden == (64, 64) and config.ppo["lean"].source
    validate_benchmark(config)
    with pytest.raises(ConfigError, match="ppo has no configurations"):
        validate_benchmark(dataclasses.replace(config, ppo={}))
    validate_benchmark(dataclasses.replace(config, ppo={}, methods=("shac", "apg")))  # not needed then
    bad = dataclasses.replace(config.ppo["lean"], batch_size=3)
    with pytest.raises(ConfigError, match=re.escape("ppo.lean.batch_size * ppo.lean.num_minibatches (3 * 8)")):
        validate_benchmark(dataclasses.replace(config, ppo={"lean": bad}))


def test_replace_section_keeps_the_rest(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nhand-written\n")
    report.replace_section(doc, "learning_x", "first")
    report.replace_section(doc, "learning_x", "second")
    report.replace_section(doc, "learning_y", "other")
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nhand-written\n")
    assert "second" in text and "first" not in text and text.count("<!-- begin learning_x -->") == 1
    assert text.index("learning_x") < text.index("learning_y")


def test_ppo_stops_at_the_first_evaluation_after_its_budget():
    env = envs.make("pendulum_swingup", episode_length=20)
    config = PPOConfig(
        num_envs=8,
        batch_size=8,
        num_minibatches=2,
        unroll_length=5,
        num_updates_per_batch=1,
        policy_hidden=(8,),
        value_hidden=(8,),
        eval_every_steps=80,  # one training step of 8 * 5 * 2 steps
    )
    result = train_ppo(env, config, seed=0, budget_s=1e-6, episodes=2)
    # evaluated untrained and after laps 1, 2 (compiling) and 3 (compile time known, budget spent): stop
    assert [r.env_steps for r in result.records] == [0, 80, 160, 240]
    assert [r.method for r in result.records] == ["ppo"] * 4
    assert len(result.laps_s) == 3 and result.compile_s is not None
    times = [r.wall_time_s for r in result.records]
    assert times[0] == 0.0 and 0 <= times[1] <= times[2] <= times[3]
    assert all(r.eval_return == r.eval_return for r in result.records)  # not NaN


def test_the_budget_schedule_times_each_epoch_but_the_first_into_the_state_the_rates_decay_on(monkeypatch):
    from shac.run.budget import TrainingClock
    from shac.tools.benchmarks import learning
    from tests import tiny_configs
    from tests.toy_env import LineEnv

    readings = itertools.count(100.0, 0.25)  # each epoch takes 0.25 s on this clock
    monkeypatch.setattr(learning, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: next(readings))}))
    clocks = []
    monkeypatch.setattr(learning, "TrainingClock", lambda minutes: clocks.append(TrainingClock(minutes)) or clocks[-1])
    config = dataclasses.replace(tiny_configs.SHAC, budget_minutes=1.0)
    steps = config.num_envs * config.horizon
    env = LineEnv(episode_length=5)
    result = learning.train_shac(env, config, seed=0, budget_s=1e-6, episodes=2, eval_every_steps=steps)
    # evaluated untrained and after epochs 1, 2 and 3 (the budget clock stops it there); epoch 1 compiles
    assert [r.env_steps for r in result.records] == [0, steps, 2 * steps, 3 * steps]
    assert clocks[0].trained_s == 0.5
    assert next(readings) == 100.0 + 6 * 0.25  # two readings per epoch


def test_a_budget_schedule_does_not_extend_runs_of_another_schedule():
    from launch.benchmark import learning
    from shac.config import ConfigError

    config = benchmark_config("env=pendulum_swingup", "methods=[shac]")  # the budget's decay by default
    assert config.shac_budget_schedule
    run = {"method": "shac", "config": "paper", "seed": 0, "records": [], "compile_s": None, "laps_s": []}
    with pytest.raises(ConfigError, match=r"over max_epochs, this one over budget .* \(shac_budget_schedule=false ext"):
        learning(config, {}, (run,))
    fixed = benchmark_config("env=pendulum_swingup", "methods=[shac]", "shac_budget_schedule=false")
    with pytest.raises(ConfigError, match=r"over budget, this one over max_epochs .* \(shac_budget_schedule=true ext"):
        learning(fixed, {}, ({**run, "lr_decay": "budget"},))
    learning(fixed, {}, (run,))  # the same schedule: kept, nothing trained
    calibrated = {**run, "max_epochs": 761, "budget_epochs": 761}  # the option's earlier version
    with pytest.raises(ConfigError, match="over calibrated epochs, this one over budget"):
        learning(config, {}, (calibrated,))


@pytest.mark.parametrize("name", ["cartpole_swingup", "hopper", "half_cheetah", "ant", "humanoid"])
def test_the_throughput_suites_other_envs_get_the_settings_their_own_config_composes(name):
    # throughput.envs=[...] reads each env's SHAC settings without Hydra; the Ant's and the humanoid's have a
    # nested section (algo.ahac)
    from launch.benchmark import env_algo

    assert env_algo(name) == benchmark_config(f"env={name}").algo


def test_throughput_measures_the_configs_own_point_with_the_epochs_parts_and_apg(tmp_path):
    # one command for both presets' paths: the gpu preset, with its grid emptied as the cpu preset's is
    run_cli(
        "launch/benchmark.py",
        "preset=gpu",
        "env=pendulum_swingup",
        "algo.num_envs=4",
        "algo.horizon=3",
        "throughput.envs=[pendulum_swingup]",
        "throughput.num_envs=[]",
        "throughput.horizons=[]",
        "throughput.repeats=1",
        "throughput.apg_updates=1",
        "docs=",
        f"hydra.run.dir={tmp_path}",
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["suite"] == "throughput" and results["preset"] == "gpu"
    assert len(results["load_average_at_start"]) == 3
    [point] = results["points"]
    assert (point["env"], point["num_envs"], point["horizon"]) == ("pendulum_swingup", 4, 3)  # the config's own
    parts = ("gradient_s", "actor_update_s", "critic_fit_s", "target_update_s")
    assert all(point[part] > 0 for part in parts)
    assert point["backward_s"] == pytest.approx(point["gradient_s"] - point["forward_s"])
    assert point["rest_s"] == pytest.approx(point["epoch_s"] - sum(point[part] for part in parts))
    assert point["steps_per_s"] == pytest.approx(12 / point["epoch_s"])
    assert point["forward_steps_per_s"] == pytest.approx(12 / point["forward_s"])
    assert point["overhead"] > 0 and point["apg_update_s"] > 0 and point["epoch_memory_bytes"] > 0
    assert (tmp_path / "throughput.png").is_file()


def test_the_throughput_presets_grids():
    cpu, gpu = (benchmark_config("suite=throughput", f"preset={p}").throughput for p in ("cpu", "gpu"))
    assert (cpu.envs, cpu.num_envs, cpu.horizons) == ((), (), ())  # the env's own defaults
    assert (gpu.envs, gpu.num_envs, gpu.horizons) == (("ant", "humanoid"), (4096,), (32,))


def test_epoch_parts_table_gives_each_part_in_ms_and_as_a_share():
    point = {
        "env": "ant",
        "num_envs": 64,
        "horizon": 8,
        "epoch_s": 0.2,
        "forward_s": 0.05,
        "backward_s": 0.07,
        "actor_update_s": 0.002,
        "critic_fit_s": 0.06,
        "target_update_s": 0.001,
        "rest_s": 0.017,
        "steps_per_s": 2560.0,
        "forward_steps_per_s": 10240.0,
    }
    table = report.epoch_parts_table([point, {"env": "old", "epoch_s": 1.0}])
    assert table.splitlines()[2] == (
        "| ant | 64 | 8 | 2,560 | 10,240 | 200.0 | 50.0 (25%) | 70.0 (35%) | 2.0 (1%) | 60.0 (30%) | 1.0 (0%) "
        "| 17.0 (8%) |"
    )
    assert len(table.splitlines()) == 3  # a point measured before the parts were timed is left out


def test_gradient_profile_prints_times_and_the_largest_kernels(tmp_path):
    out = run_cli(
        "launch/profile_gradient.py",
        "env=pendulum_swingup",
        "num_envs=2",
        "horizon=4",
        "top=3",
        "hold_linesearch=true",
        f"out={tmp_path}",
    )
    ratio = re.search(
        r"pendulum_swingup, N=2, h=4, line search held: forward ([\d.]+) ms, gradient ([\d.]+) ms, ratio ([\d.]+)", out
    )
    forward_ms, gradient_ms, ratio = (float(x) for x in ratio.groups())
    assert ratio == pytest.approx(gradient_ms / forward_ms, rel=0.05)
    kernels = re.findall(r"^  (\S+) +([\d.]+) ms +(\d+) calls", out, re.MULTILINE)
    assert len(kernels) == 6 and all(int(calls) > 0 for _, _, calls in kernels)
    assert list((tmp_path / "pendulum_swingup" / "gradient").rglob("*.trace.json.gz"))


def test_the_playground_suite_composes_its_one_setting_and_peers_and_needs_env_playground():
    from shac.config import ConfigError
    from shac.tools.benchmarks.config import DM_CONTROL_SAMPLE, validate_benchmark

    config = benchmark_config("suite=playground", "env=playground")
    other = benchmark_config("suite=playground")
    validate_benchmark(config)
    assert (config.algo.horizon, config.algo.num_critics, config.playground.tasks) == (16, 2, DM_CONTROL_SAMPLE)
    assert config.ppo["playground"].reward_scaling == 10.0  # Playground's own: its rewards are in [0, 1]
    with pytest.raises(ConfigError, match="suite=playground needs env=playground"):
        validate_benchmark(other)


def test_the_survey_table_shows_failures_flat_rewards_and_costs():
    from shac.tools.benchmarks.playground import survey_table

    entries = [
        {"task": "playground/ReacherEasy", "built": False, "error": "cannot be built: AttributeError"},
        {
            "task": "playground/PendulumSwingup",
            "built": True,
            "model_changes": ["opt.iterations 4 -> 1 (MJX's reverse mode needs one solver iteration)"],
            "reward_grad_norm": 0.0,
            "obs_grad_norm": 2.5,
            "finite": True,
            "flat_reward": True,
            "first_epoch_s": 61.2,
            "us_per_env_step": 83.4,
            "skipped_updates": 0.0,
            "epochs": 10,
        },
    ]
    rows = survey_table(entries).splitlines()
    assert rows[2] == "| playground/ReacherEasy | no: cannot be built: AttributeError | | | | | | |"
    assert rows[3] == "| playground/PendulumSwingup | yes | opt.iterations 4 -> 1 | 0 / 2.5 | yes | 61 | 83 | 0 of 10 |"


def test_ppo_takes_playgrounds_own_values_for_each_task_and_keeps_the_scaled_batch():
    from shac.tools.benchmarks.config import PPOConfig
    from shac.tools.benchmarks.playground import published_ppo

    scaled = PPOConfig(source="scaled", num_envs=256, batch_size=128, reward_scaling=10.0)
    assert published_ppo("playground/CartpoleSwingup", scaled) is scaled  # Playground's defaults: nothing to change
    finger = published_ppo("playground/FingerSpin", scaled)  # Playground discounts FingerSpin at 0.95
    assert (finger.discounting, finger.num_envs, finger.batch_size) == (0.95, 256, 128)
    assert finger.source == "scaled; FingerSpin: discounting 0.95"


def test_a_playground_benchmark_extends_earlier_parts_with_every_command():
    from shac.tools.benchmarks.playground import extend_results

    def part(command, date, survey, learning, load):
        return {"command": command, "date": date, "survey": survey, "learning": learning, "load_average_at_start": load}

    a_shac = {"runs": [1], "budget_s": 300, "chosen": {"shac": "paper"}}
    surveyed = [{"task": "A", "built": False}, {"task": "B"}]
    first = part("run a", "2026-12-01 10:43 UTC", surveyed, {"playground/A": a_shac}, [1.0, 1.5, 2.0])
    again = [{"task": "A", "built": True}, {"task": "C"}]  # A surveyed again: its new entry, in its place
    second = part("run b", "2026-12-01 13:05 UTC", again, {"playground/B": {"runs": [2]}}, [2.0] * 3)
    a_ppo = {"runs": [3], "budget_s": 600, "chosen": {"shac": "other", "ppo": "playground"}}
    new = part("run c", "2026-12-01 15:00 UTC", [], {"playground/A": a_ppo}, [3.0] * 3)
    merged = extend_results([first, second], new)
    assert merged["command"] == "run a\nrun b\nrun c"
    assert merged["date"] == "2026-12-01 10:43 UTC"
    assert merged["load_average_at_start"] == first["load_average_at_start"] != new["load_average_at_start"]
    assert [(p["command"], p["date"], p["load_average_at_start"]) for p in merged["parts"]] == [
        ("run a", "2026-12-01 10:43 UTC", [1.0, 1.5, 2.0]),
        ("run b", "2026-12-01 13:05 UTC", [2.0] * 3),
        ("run c", "2026-12-01 15:00 UTC", [3.0] * 3),
    ]
    again = extend_results([merged], part("run d", "2026-12-02 09:00 UTC", [], {}, [0.5] * 3))
    assert [p["command"] for p in again["parts"]] == ["run a", "run b", "run c", "run d"]  # a merge's parts kept
    assert merged["survey"] == [{"task": "A", "built": True}, {"task": "B"}, {"task": "C"}]
    assert list(merged["learning"]) == ["playground/A", "playground/B"]
    # a task learned in two parts: the first part's settings, every part's runs, each method's first choice
    assert merged["learning"]["playground/A"] == {
        "runs": [1, 3],
        "budget_s": 300,
        "chosen": {"shac": "paper", "ppo": "playground"},
    }
    assert new["learning"]["playground/A"]["runs"] == [3]  # the parts are not changed in place
    assert first["learning"]["playground/A"]["runs"] == [1]
    # two halves run side by side over the same earlier results: its parts and runs once, each half's own
    halves = {"e": {"playground/A": {"runs": [5]}}, "f": {"playground/B": {"runs": [6]}}}
    left, right = (
        extend_results([merged], part(f"run {k}", "2026-12-03 09:00 UTC", [], v, [1.0] * 3)) for k, v in halves.items()
    )
    both = extend_results([left, right], part("merge", "2026-12-03 12:00 UTC", [], {}, [0.1] * 3))
    assert both["command"] == "run a\nrun b\nrun c\nrun e\nrun f\nmerge"
    assert [p["command"] for p in both["parts"]] == ["run a", "run b", "run c", "run e", "run f", "merge"]
    assert both["learning"]["playground/A"]["runs"] == [1, 3, 5]
    assert both["learning"]["playground/B"]["runs"] == [2, 6]


def test_the_docs_header_gives_each_parts_load_average():
    from launch.benchmark import measured_on

    machine = {"cpu_count": 2, "device": "cpu", "jax": "0.9.2"}
    one = {**machine, "date": "2026-12-01 10:43 UTC", "load_average_at_start": [1.0, 1.5, 2.0]}
    header = "Measured 2026-12-01 10:43 UTC on 2 CPU cores (cpu, jax 0.9.2), load average at start 1.00, 1.50, 2.00"
    assert measured_on(one) == header + " (1, 5, 15 min)"
    parts = [
        {"date": "2026-12-01 10:43 UTC", "load_average_at_start": [1.0, 1.5, 2.0]},
        {"date": "2026-12-02 09:00 UTC", "load_average_at_start": [0.5, 0.25, 3.0]},
    ]
    assert measured_on({**one, "parts": parts}) == (
        header + " (1, 5, 15 min); each part's, in order: 1.00, 1.50, 2.00 (2026-12-01 10:43 UTC); "
        "0.50, 0.25, 3.00 (2026-12-02 09:00 UTC)"
    )


def test_the_docs_say_what_the_shac_family_runs_decayed_their_learning_rates_over():
    from launch.benchmark import decay_note

    budget = {"method": "shac", "lr_decay": "budget"}
    fixed = {"method": "sapo"}  # written before the option: over max_epochs
    calibrated = {"method": "ahac", "budget_epochs": 761}
    ppo = {"method": "ppo"}
    assert decay_note({"suite": "learning", "runs": [fixed, fixed, ppo]}) == (
        "SHAC, AHAC and SAPO runs decayed their learning rates over `algo.max_epochs` alone "
        "(`shac_budget_schedule=false`): 2 runs.\n\n"
    )
    learning = {"playground/A": {"runs": [budget, ppo]}, "playground/B": {"runs": [calibrated, fixed]}}
    assert decay_note({"suite": "playground", "learning": learning}) == (
        "SHAC, AHAC and SAPO runs decayed their learning rates on each run's training clock, to end with its "
        "budget (`shac_budget_schedule=true`): 1 run; over epochs timed before each run (an earlier version of "
        "`shac_budget_schedule`): 1 run; over `algo.max_epochs` alone (`shac_budget_schedule=false`): 1 run.\n\n"
    )
    assert decay_note({"suite": "playground", "learning": {}}) == ""  # a survey only
    assert decay_note({"suite": "learning", "runs": [ppo]}) == ""


def test_the_playground_comparison_reads_each_method_at_equal_steps_and_equal_time():
    from shac.tools.benchmarks.playground import comparison_table

    def run(method, records):
        return {
            "method": method,
            "seed": 0,
            "records": [{"env_steps": s, "wall_time_s": t, "eval_return": r} for s, t, r in records],
        }

    shac = run("shac", [(0, 0, 1.0), (100, 10, 5.0), (200, 20, 9.0), (300, 30, 12.0)])
    ppo = run("ppo", [(0, 0, 0.0), (250, 25, 4.0)])
    other_seed = {**run("ppo", [(0, 0, 0.0), (900, 90, 99.0)]), "seed": 1}
    sources = {"ppo": {"playground": "scaled; A: discounting 0.95"}}
    learning = {
        "playground/A": {
            "config": {"seed": 0},
            "runs": [shac, ppo, other_seed],
            "sources": sources,
            "chosen": {"ppo": "playground"},
        }
    }
    row = comparison_table(learning).splitlines()[2]
    # PPO's two seeds end at 250 and 900 steps: S = min(300, 250, 900) = 250 and T = 25 s. SHAC's last
    # evaluation at or before S is 9.0; PPO's are 4.0 and 0.0 (mean 2.0); its finals 4.0 and 99.0 (mean 51.5).
    assert row == "| A | 1 / 2 | 12.0 (300) | 51.5 (250, 900) | 250 | 9.0 | 2.0 | 25 s | 9.0 | 2.0 | discounting 0.95 |"
    assert len(comparison_table(learning, ("sapo", "ppo")).splitlines()) == 2  # no SAPO run: no row


def test_the_reference_table_scores_each_task_against_playgrounds_published_return_and_its_steps():
    from shac.tools.benchmarks.playground import PUBLISHED_PPO_RETURNS, reference_table

    def run(seed, records):
        return {"method": "shac", "seed": seed, "records": [{"env_steps": s, "eval_return": r} for s, r in records]}

    assert PUBLISHED_PPO_RETURNS["CheetahRun"] == 850.0  # 80%: 680
    cheetah = [run(0, [(0, 10.0), (50, 700.0), (150, 690.0)]), run(1, [(0, 5.0), (80, 600.0), (120, 720.0)])]
    learning = {"playground/CheetahRun": {"runs": cheetah}, "playground/MyTask": {"runs": [run(0, [(0, 1.0)])]}}
    # seed 0 reaches 680 at 50 steps, seed 1 at 120: the slowest, 120, is over a tenth of 1,000 PPO steps;
    # the finals 690 and 720 average 705, 83% of 850. With 2,000 PPO steps, 120 is within a tenth.
    rows = reference_table(learning, "shac", {"CheetahRun": 1000}).splitlines()
    assert rows[2] == "| CheetahRun | 705.0 (2) | 850 | 1,000 | 83% | 120 | no |"
    assert rows[3] == "| MyTask | 1.0 (1) | - | - | - | - | - |"
    assert reference_table(learning, "shac", {"CheetahRun": 2000}).splitlines()[2].endswith("| 120 | yes |")
    # a seed that never reaches 80%, or a mean final below it, does not meet the reference
    slow = {"playground/CheetahRun": {"runs": [cheetah[0], run(1, [(0, 5.0), (80, 600.0)])]}}
    assert reference_table(slow, "shac", {"CheetahRun": 2000}).splitlines()[2].endswith("| not reached | no |")
    fell = {"playground/CheetahRun": {"runs": [run(0, [(0, 10.0), (50, 700.0), (150, 300.0)])]}}
    assert reference_table(fell, "shac", {"CheetahRun": 2000}).splitlines()[2].endswith("| 50 | no |")
    assert len(reference_table(learning, "sapo", {"CheetahRun": 1000}).splitlines()) == 2  # no SAPO run


def test_a_playground_benchmark_renders_the_reference_table_with_playgrounds_own_steps(tmp_path):
    from launch.benchmark import render

    def run(method, records):
        run = {"method": method, "config": "default", "seed": 0}
        points = [{"env_steps": s, "wall_time_s": s / 1000, "eval_return": r, "eval_std": 1.0} for s, r in records]
        return {**run, "records": [{**run, **point} for point in points]}

    task = {
        "suite": "learning",
        "env": "playground/AcrobotSwingup",
        "budget_s": 60.0,
        "config": {"seed": 0},
        "runs": [run("shac", [(0, 1.0), (5000, 200.0)]), run("ppo", [(0, 2.0), (4000, 9.0)])],
    }
    results = {"suite": "playground", "survey": [], "learning": {"playground/AcrobotSwingup": task}}
    section, text, _ = render(results, tmp_path)
    assert section == "playground_learning"
    # Playground trains PPO 100M steps on the acrobot (60M on most tasks); 200.0 is 91% of its 220
    assert "| AcrobotSwingup | 200.0 (1) | 220 | 100,000,000 | 91% | 5,000 | yes |" in text.splitlines()
