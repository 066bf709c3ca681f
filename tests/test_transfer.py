"""The identify-narrow-retrain-transfer loop: the real file and its checks, evaluation and recording on it,
the loop's ranges, nearby models and summary, its stage order, and one tiny loop end to end (slow)."""

import json
import math
import re
import shutil

import jax
import numpy as np
import pytest

import envs
from launch import cli
from launch.record_trajectory import RecordArgs, simulate
from launch.transfer import Plan, StageError, TransferArgs, evaluate, hydra_ranges, plan, record
from shac.config import EnvConfig, RandomizationConfig, TrainConfig
from shac.core.algorithm import Shac
from shac.core.normalizer import RunningStatistics
from shac.run.commands import evaluate_run
from shac.run.real import check_real, load_real, real_env
from shac.run.serialization import save_config, save_policy
from shac.sysid.noise import MISFIT_LIMIT
from shac.tools.transfer import (
    POLICIES,
    markdown,
    narrow_ranges,
    nearby_models,
    outside_wide,
    summarize,
    unresolved,
    wide_ranges,
)
from tests import tiny_configs
from tests.forked_python import ROOT, run_python

CARTPOLE = envs.make("cartpole_swingup")
CARTPOLE_REAL = ROOT / "configs" / "real" / "cartpole_swingup.yaml"
PARAMS = "params=[body:pole:mass,joint:hinge:frictionloss]"
GUESS = "init=[joint:hinge:frictionloss=0.1]"


def real_file(tmp_path, text):
    path = tmp_path / "real.yaml"
    path.write_text(text)
    return str(path)


# --- the real file ---


def test_the_example_real_files_fit_their_models():
    files = sorted((ROOT / "configs" / "real").glob("*.yaml"))  # each named <env>[_<variant>].yaml
    assert len(files) >= 6
    for path in files:
        env = next(name for name in ("cartpole_swingup", "hopper") if path.stem.startswith(name))
        check_real(load_real(str(path)), envs.make(env).mj_model, str(path))
    assert load_real(str(CARTPOLE_REAL)) == {"body:pole:mass": 0.75, "joint:hinge:frictionloss": 0.05}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- body:pole:mass\n", "must map element:name:attribute to values, e.g. 'body:pole:mass: 0.75'; got list"),
        ("", "must map element:name:attribute to values, e.g. 'body:pole:mass: 0.75'; got nothing"),
        ("mass: 0.75\n", "key 'mass' is not element:name:attribute, e.g. body:pole:mass"),
        ("body:pole:mass: heavy\n", "'body:pole:mass' is 'heavy', not a finite number"),
        ("body:pole:mass: .nan\n", "'body:pole:mass' is nan, not a finite number"),
        ("body:pole:mass: [0.5, 1]\n", "'body:pole:mass' is [0.5, 1], not a finite number"),
    ],
)
def test_a_real_file_of_the_wrong_form_fails_in_one_line(tmp_path, text, message):
    path = real_file(tmp_path, text)
    with pytest.raises(ValueError) as error:
        load_real(path)
    assert str(error.value).startswith(f"real file '{path}'") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_a_yaml_exponent_without_a_dot_still_reads_as_a_number(tmp_path):
    # YAML 1.1 reads 5e-2 as a string; a real file means the number
    assert load_real(real_file(tmp_path, "joint:hinge:frictionloss: 5e-2\n")) == {"joint:hinge:frictionloss": 0.05}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("body:pole:volume: 1.0\n", "unsupported parameter 'body:pole:volume'; accepted: joint:<name>:damping|"),
        ("body:pol:mass: 1.0\n", "no body named 'pol' in the model; bodies: world, cart, pole"),
        ("joint:elbow:damping: 0.1\n", "no joint named 'elbow' in the model; joints: slider, hinge"),
        ("body:pole:mass: -0.5\n", "'body:pole:mass' = -0.5 must be > 0 (a mass; the inertia is scaled with it)"),
        ("joint:hinge:damping: -0.1\n", "'joint:hinge:damping' = -0.1 must be >= 0 (damping cannot be negative)"),
        ("actuator:force:gear: -50\n", "'actuator:force:gear' = -50.0 must be > 0, the sign of the model's gear 50.0"),
    ],
)
def test_a_real_file_the_model_cannot_take_fails_in_one_line_naming_the_key(tmp_path, text, message):
    path = real_file(tmp_path, text)
    with pytest.raises(ValueError) as error:
        check_real(load_real(path), CARTPOLE.mj_model, path)
    assert str(error.value).startswith(f"real file '{path}': ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_the_real_environment_has_the_real_values_in_its_model_and_drops_the_runs_randomisation():
    config = TrainConfig(
        env=EnvConfig(name="cartpole_swingup"),
        algo=tiny_configs.SHAC,
        randomization=RandomizationConfig(mode="uniform", ranges={"joint:slider:damping": [0.0, 1.0]}),
    )
    real = load_real(str(CARTPOLE_REAL))
    env = real_env(config, real, CARTPOLE.mj_model, str(CARTPOLE_REAL))
    assert [parameter.key for parameter in env.randomized] == list(real)
    shorter = real_env(config, real, CARTPOLE.mj_model, str(CARTPOLE_REAL), episode_length=7)
    assert (env.episode_length, shorter.episode_length) == (CARTPOLE.episode_length, 7)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.key(0), 3))
    pole, hinge = 2, 1  # body ids world, cart, pole; dofs slider, hinge
    for i in range(3):
        model = env.model(jax.tree.map(lambda x, i=i: x[i], states))
        assert float(model.body_mass[pole]) == pytest.approx(0.75, rel=1e-6)
        assert float(model.dof_frictionloss[hinge]) == pytest.approx(0.05, rel=1e-6)
        assert float(model.dof_damping[0]) == 0.0  # the run's slider damping is not randomised
        # the pole's inertia scales with its mass: 0.5 kg -> 0.75 kg is 1.5 times
        np.testing.assert_allclose(model.body_inertia[pole], 1.5 * CARTPOLE.mj_model.body_inertia[pole], rtol=1e-6)


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    """A run directory of the cart-pole (8-step episodes) holding a random policy, without training."""
    run_dir = tmp_path_factory.mktemp("cartpole_run")
    config = TrainConfig(env=EnvConfig(name="cartpole_swingup", episode_length=8), algo=tiny_configs.SHAC)
    save_config(run_dir, config)
    env = envs.make("cartpole_swingup", episode_length=8)
    shapes = jax.eval_shape(Shac(config.algo, env).init, jax.random.key(0)).actor_params
    rng = np.random.default_rng(0)
    actor_params = jax.tree.map(lambda x: rng.normal(0.0, 0.5, x.shape).astype(x.dtype), shapes)
    save_policy(run_dir, actor_params, RunningStatistics.create(env.observation_size))
    return run_dir


def test_evaluating_on_the_real_file_changes_the_returns(cartpole_run):
    nominal = evaluate_run(str(cartpole_run), episodes=2)
    real = evaluate_run(str(cartpole_run), episodes=2, real=str(CARTPOLE_REAL))
    assert real["real"] == str(CARTPOLE_REAL) and "real" not in nominal
    assert abs(real["mean_return"] - nominal["mean_return"]) > 1e-3


def test_nominal_true_evaluates_a_randomised_run_on_its_nominal_model(tmp_path, cartpole_run):
    randomised = tmp_path / "randomised"
    shutil.copytree(cartpole_run, randomised)
    ranges = {"body:pole:mass": [2.0, 4.0]}  # the nominal pole weighs 0.5 kg
    config = TrainConfig(
        env=EnvConfig(name="cartpole_swingup", episode_length=8),
        algo=tiny_configs.SHAC,
        randomization=RandomizationConfig(mode="uniform", ranges=ranges),
    )
    save_config(randomised, config)
    plain = evaluate_run(str(cartpole_run), episodes=2)
    on_its_ranges = evaluate_run(str(randomised), episodes=2)
    on_nominal = evaluate_run(str(randomised), episodes=2, nominal=True)
    assert on_nominal["nominal"] is True and "nominal" not in on_its_ranges
    assert on_nominal["mean_return"] == pytest.approx(plain["mean_return"], rel=1e-6)
    assert abs(on_its_ranges["mean_return"] - plain["mean_return"]) > 1e-3
    with pytest.raises(ValueError, match="exclude each other"):
        evaluate_run(str(randomised), real=str(CARTPOLE_REAL), nominal=True)


def test_evaluating_on_a_bad_real_file_fails_in_one_line_through_the_command_line(tmp_path, cartpole_run):
    path = real_file(tmp_path, "body:pole:mass: -1\n")
    result = run_python("launch/evaluate.py", f"run_dir={cartpole_run}", f"real={path}", timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    reason = "'body:pole:mass' = -1.0 must be > 0 (a mass; the inertia is scaled with it)"
    assert last == f"error: real file '{path}': {reason}"


def test_recording_from_the_real_file_is_recording_with_its_values_as_true_params(tmp_path):
    common = ["env=cartpole_swingup", "out=x.npz", "seconds=2", "excitation=random"]
    from_file = cli.parse(RecordArgs, [*common, f"real={CARTPOLE_REAL}"], "usage")
    given = cli.parse(RecordArgs, [*common, "true_params=[body:pole:mass=0.75,joint:hinge:frictionloss=0.05]"], "")
    nominal = cli.parse(RecordArgs, common, "usage")
    recorded, _, _ = simulate(from_file, CARTPOLE)
    np.testing.assert_array_equal(recorded.qvel, simulate(given, CARTPOLE)[0].qvel)
    assert not np.allclose(recorded.qvel, simulate(nominal, CARTPOLE)[0].qvel)
    twice = cli.parse(RecordArgs, [*common, f"real={CARTPOLE_REAL}", "true_params=[body:pole:mass=1]"], "usage")
    with pytest.raises(ValueError, match=re.escape("body:pole:mass given both in true_params and in real file")):
        simulate(twice, CARTPOLE)


# --- the loop's arithmetic ---


def sysid_report(converged=True, **relative_std):
    parameters = {
        key.replace("__", ":"): {"estimate": 2.0, "relative_std": std, "ci95": [1.9, 2.1]}
        for key, std in relative_std.items()
    }
    return {"converged": converged, "parameters": parameters}


def test_a_parameter_is_unresolved_past_the_relative_error_or_when_the_fit_is_not_sound():
    report = sysid_report(body__pole__mass=0.01, joint__hinge__frictionloss=0.2, signal__ctrl__delay=0.5)
    assert unresolved(report) == ["joint:hinge:frictionloss"]  # the delay is no model parameter
    assert unresolved(report, max_relative_std=0.3) == []
    report["parameters"]["body:pole:mass"]["relative_std"] = math.inf  # an undetermined direction
    assert unresolved(report) == ["body:pole:mass", "joint:hinge:frictionloss"]
    assert unresolved(sysid_report(False, body__pole__mass=0.01)) == ["body:pole:mass"]
    # converged, but the residuals far above the data's noise: a wrong minimum resolves nothing
    assert unresolved(sysid_report(body__pole__mass=0.01) | {"misfit": MISFIT_LIMIT + 0.1}) == ["body:pole:mass"]
    assert unresolved(sysid_report(body__pole__mass=0.01) | {"misfit": MISFIT_LIMIT}) == []


def test_narrow_ranges_follow_the_report_and_take_the_wide_range_where_widened(tmp_path):
    report = sysid_report(body__pole__mass=0.01, joint__hinge__frictionloss=0.2)
    path = tmp_path / "sysid.json"
    path.write_text(json.dumps(report))
    wide = {"body:pole:mass": (0.25, 1.0), "joint:hinge:frictionloss": (0.0, 0.2)}
    ranges = narrow_ranges(str(path), report, 4.0, wide, ["joint:hinge:frictionloss"])
    # 2.0 * exp(-+4 * 0.01)
    assert ranges["body:pole:mass"] == pytest.approx((2.0 * math.exp(-0.04), 2.0 * math.exp(0.04)))
    assert ranges["joint:hinge:frictionloss"] == (0.0, 0.2)
    # a fit that did not converge: every range is the wide one, and the report is not read for estimates
    report["converged"] = False
    path.write_text(json.dumps(report))
    assert narrow_ranges(str(path), report, 4.0, wide, list(wide)) == wide


def test_wide_ranges_scale_the_centre_unless_given_and_refuse_a_centre_of_zero():
    centres = {"body:pole:mass": 0.5, "joint:hinge:frictionloss": 0.1}
    assert wide_ranges(centres, [0.5, 2.0], {}) == {
        "body:pole:mass": (0.25, 1.0),
        "joint:hinge:frictionloss": (0.05, 0.2),
    }
    given = {"joint:hinge:frictionloss": [0.0, 0.3]}
    assert wide_ranges(centres, [0.5, 2.0], given)["joint:hinge:frictionloss"] == (0.0, 0.3)
    with pytest.raises(ValueError, match=re.escape("'joint:hinge:damping' is 0 in the model, so wide=[0.5, 2.0]")):
        wide_ranges({"joint:hinge:damping": 0.0}, [0.5, 2.0], {})
    with pytest.raises(ValueError, match=re.escape("wide must be [low, high] multipliers with 0 < low <= high")):
        wide_ranges(centres, [2.0, 0.5], {})


def test_estimates_outside_their_wide_range_are_named_only_for_a_sound_fit():
    wide = {"body:cart:mass": (0.5, 2.0), "body:pole:mass": (0.25, 1.0), "joint:hinge:frictionloss": (0.05, 0.2)}
    report = sysid_report(body__cart__mass=0.01, body__pole__mass=0.01, joint__hinge__frictionloss=0.01)
    for key, estimate, ci95 in [
        ("body:cart:mass", 4.0, [3.9, 4.1]),  # wholly above
        ("body:pole:mass", 1.001, [0.998, 1.004]),  # just past the bound, its interval across it
        ("joint:hinge:frictionloss", 0.04, [0.039, 0.041]),  # wholly below
    ]:
        report["parameters"][key] |= {"estimate": estimate, "ci95": ci95}
    assert outside_wide(report, wide) == {
        "body:cart:mass": {"estimate": 4.0, "ci95": [3.9, 4.1], "wide": [0.5, 2.0]},
        "joint:hinge:frictionloss": {"estimate": 0.04, "ci95": [0.039, 0.041], "wide": [0.05, 0.2]},
    }
    assert outside_wide(report | {"converged": False}, wide) == {}
    assert outside_wide(report | {"misfit": MISFIT_LIMIT * 2}, wide) == {}
    summary = {"return_on_real": {}, "identified": {}, "outside_wide": outside_wide(report, wide)}
    assert markdown(summary, 2, 4).endswith(
        "Estimates outside their wide range, 95% interval and all (the wide policy never trained on them):\n"
        "- `body:cart:mass`: 4 [3.9, 4.1], wide range [0.5, 2]\n"
        "- `joint:hinge:frictionloss`: 0.04 [0.039, 0.041], wide range [0.05, 0.2]\n"
    )


def test_nearby_models_scale_each_value_by_a_lognormal_factor():
    real = {"body:pole:mass": 0.75, "actuator:force:gear": -50.0, "joint:hinge:damping": 0.0}
    models = nearby_models(real, 2000, 0.1, seed=3)
    assert nearby_models(real, 2, 0.1, seed=3) == models[:2]  # the same seed, the same models
    factors = np.log([m["body:pole:mass"] / 0.75 for m in models])
    assert abs(factors.mean()) < 0.01 and factors.std() == pytest.approx(0.1, rel=0.05)
    assert all(m["actuator:force:gear"] < 0 and m["joint:hinge:damping"] == 0.0 for m in models)


def test_the_summary_averages_over_seeds_and_nearby_models_and_checks_coverage():
    evaluations = [
        {"policy": "nominal", "seed": 0, "model": "real", "mean_return": 10.0},
        {"policy": "nominal", "seed": 1, "model": "real", "mean_return": 14.0},
        {"policy": "nominal", "seed": 0, "model": "nearby_0", "mean_return": 1.0},
        {"policy": "nominal", "seed": 0, "model": "nearby_1", "mean_return": 2.0},
        {"policy": "nominal", "seed": 1, "model": "nearby_0", "mean_return": 3.0},
        {"policy": "nominal", "seed": 1, "model": "nearby_1", "mean_return": 6.0},
        {"policy": "direct", "seed": 0, "model": "real", "mean_return": 20.0},
    ]
    report = sysid_report(body__pole__mass=0.01, joint__hinge__frictionloss=0.01)
    summary = summarize(evaluations, report, {"body:pole:mass": 2.05, "joint:hinge:frictionloss": 2.5})
    assert summary["return_on_real"] == {"nominal": 12.0, "direct": 20.0}  # (10 + 14) / 2
    assert summary["return_on_real_std"] == {"nominal": 2.0, "direct": 0.0}  # |10 - 12| = |14 - 12| = 2
    assert summary["return_on_nearby"] == {"nominal": 3.0}  # (1 + 2 + 3 + 6) / 4
    assert summary["identified"]["body:pole:mass"] == {
        "estimate": 2.0,
        "ci95": [1.9, 2.1],
        "real": 2.05,
        "covered": True,
    }
    assert not summary["identified"]["joint:hinge:frictionloss"]["covered"]  # 2.5 is outside [1.9, 2.1]
    # a parameter the data did not determine has an unbounded interval, which covers nothing in particular
    report["parameters"]["joint:hinge:frictionloss"]["ci95"] = [-math.inf, math.inf]
    summary = summarize(evaluations, report, {"body:pole:mass": 2.05, "joint:hinge:frictionloss": 2.5})
    assert summary["identified"]["joint:hinge:frictionloss"]["covered"] is None
    assert "| `joint:hinge:frictionloss` | 2.5 | 2 | [-inf, inf] | unbounded: not determined |" in markdown(
        summary, 2, 2
    )
    widened = "Every parameter was widened: the identified policy trained on the wide ranges, as the wide one did."
    assert widened not in markdown(summary, 2, 2)
    assert widened in markdown(summary | {"identified_is_wide": True}, 2, 2)


def test_hand_set_ranges_reach_training_as_a_hydra_override_with_the_colons_escaped():
    assert hydra_ranges({"body:pole:mass": (0.25, 1.0)}) == [
        "randomization=uniform",
        "++randomization.ranges={body\\:pole\\:mass:[0.25,1.0]}",
    ]


# --- the loop's stages ---


def transfer_plan(tmp_path, *argv) -> Plan:
    args = [f"real={CARTPOLE_REAL}", "env=cartpole_swingup", PARAMS, GUESS, f"out={tmp_path}", "seeds=1", *argv]
    return plan(cli.parse(TransferArgs, args, "usage"))


def test_the_plan_checks_its_arguments_against_the_model(tmp_path):
    p = transfer_plan(tmp_path, "nearby=3")
    assert p.truth == {"body:pole:mass": 0.75, "joint:hinge:frictionloss": 0.05}
    # the mass around the model's 0.5, the friction around the guess 0.1 (the model has none)
    assert p.wide == {"body:pole:mass": (0.25, 1.0), "joint:hinge:frictionloss": (0.05, 0.2)}
    assert len(p.nearby) == 3 and set(p.nearby[0]) == set(p.truth)
    with pytest.raises(ValueError, match=re.escape("'joint:hinge:frictionloss' is 0 in the cartpole_swingup model")):
        plan(cli.parse(TransferArgs, ["env=cartpole_swingup", f"real={CARTPOLE_REAL}", PARAMS], "usage"))
    with pytest.raises(ValueError, match=re.escape("params: no body named 'pol' in the model")):
        transfer_plan(tmp_path, "params=[body:pol:mass]")
    with pytest.raises(ValueError, match=re.escape("unknown stage 'train'; available: all, nominal, record, identify")):
        transfer_plan(tmp_path, "stage=train")


def test_a_stage_whose_input_is_missing_names_the_stage_to_run_first(tmp_path):
    command = ["launch/transfer.py", "env=cartpole_swingup", f"real={CARTPOLE_REAL}", PARAMS, GUESS, f"out={tmp_path}"]
    result = run_python(*command, "stage=narrow", timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"error: stage narrow needs {tmp_path / 'identify' / 'sysid.json'}; run stage=identify first"
    p = transfer_plan(tmp_path)
    (tmp_path / "identify").mkdir()
    (tmp_path / "identify" / "sysid.json").write_text(json.dumps(sysid_report(body__pole__mass=0.01)))
    with pytest.raises(StageError, match=re.escape("/nominal/seed0/policy.msgpack; run stage=nominal first")):
        evaluate(p)
    # a recording under the policy needs the nominal policy
    with pytest.raises(StageError, match=re.escape("stage record needs ") + ".*/nominal/seed0/policy.msgpack"):
        record(transfer_plan(tmp_path, "excitation=policy"))


@pytest.mark.slow
def test_a_tiny_loop_on_the_cartpole_ends_with_a_complete_summary_and_resumes_by_skipping(tmp_path):
    argv = [
        "launch/transfer.py",
        "env=cartpole_swingup",
        f"real={CARTPOLE_REAL}",
        PARAMS,
        GUESS,
        "wide_ranges={joint:hinge:frictionloss: [0.0, 0.2]}",
        f"out={tmp_path}",
        "seeds=1",
        "seconds=5",
        "episodes=2",
        "nearby=1",
        "train=[algo.max_epochs=4,algo.num_envs=4,eval.every=0,eval.episodes=2,logger=disabled]",
    ]
    result = run_python(*argv, timeout=1800)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    for name in ("return_on_real", "return_on_real_std"):
        assert set(summary[name]) == set(POLICIES) and all(math.isfinite(v) for v in summary[name].values())
    assert set(summary["return_on_nearby"]) == {"nominal", "identified", "wide"}
    assert all(math.isfinite(v) for v in summary["return_on_nearby"].values())
    assert set(summary["identified"]) == {"body:pole:mass", "joint:hinge:frictionloss"}
    for entry in summary["identified"].values():
        assert set(entry) == {"estimate", "ci95", "real", "covered"} and math.isfinite(entry["estimate"])
    assert summary["outside_wide"] == {}  # the real pole and friction lie within their wide ranges
    assert (tmp_path / "summary.md").is_file() and (tmp_path / "summary.png").stat().st_size > 0
    for stage in ("nominal", "record", "identify", "narrow", "wide", "direct", "evaluate"):
        assert f"[transfer] {stage}: done in " in result.stdout
    again = run_python(*argv)
    assert again.returncode == 0 and again.stdout.count("done already") == 7, again.stdout
