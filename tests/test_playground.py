"""MuJoCo Playground's tasks through envs/playground.py: built, differentiable, trained, evaluated and resumed.

Two small dm_control-suite tasks: the cart-pole swing-up (one solver iteration, a slider
limit: the NaN gradient's home) and the pendulum (four solver iterations, set to one).
"""

import functools
import json
import shutil
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from mujoco_playground import registry

import envs
from envs import playground as bridge
from envs import private_apis
from envs.physics.smoothing import Smoothing
from shac.config import ConfigError, EnvConfig, make_env
from shac.core.algorithms import make_algorithm
from shac.run.serialization import load_config
from tests import tiny_configs
from tests.conftest import run_cli
from tests.run_states import checkpoint_arrays

CARTPOLE = "playground/CartpoleSwingup"
PENDULUM = "playground/PendulumSwingup"
STEPS = 3


@pytest.fixture(scope="module")
def cartpole():
    return envs.make(CARTPOLE, episode_length=STEPS)


def rollout(env, actions, state=None):
    """The states after each of `actions` (float32 [T, action_dim]) from a reset with key 0."""

    def body(state, action):
        state = env.step(state, action)
        return state, state

    return jax.lax.scan(body, env.reset(jax.random.key(0)) if state is None else state, actions)[1]


def test_a_task_declares_its_episode_length_and_warns_once_that_it_runs_mjx_jax():
    assert envs.declared_episode_length(CARTPOLE) == 1000  # Playground's config, read without building
    with pytest.warns(UserWarning, match=r"'CartpoleSwingup': impl='jax' .* instead of its config's 'warp'"):
        env = envs.make(CARTPOLE)
    assert (env.episode_length, env.observation_size, env.action_size, env.ctrl_dt) == (1000, 5, 1, 0.01)
    assert env.model_changes == ()


def test_a_solver_of_several_iterations_is_set_to_one_and_reported():
    assert registry.load("PendulumSwingup").mj_model.opt.iterations == 4
    with pytest.warns(UserWarning, match=r"opt.iterations 4 -> 1"):
        env = envs.make(PENDULUM)
    assert env.mj_model.opt.iterations == 1
    assert env.model_changes == ("opt.iterations 4 -> 1 (MJX's reverse mode needs one solver iteration)",)


def test_rewards_terms_and_the_time_limit_follow_playground(cartpole):
    actions = jnp.array([[1.0], [-0.5], [0.25]])
    ours = jax.jit(rollout, static_argnums=0)(cartpole, actions)
    theirs = registry.load("CartpoleSwingup", config_overrides={"impl": "jax"})
    state = jax.jit(theirs.reset)(jax.random.key(0))  # jitted: op by op, MJX compiles each operation on its own
    step = jax.jit(theirs.step)
    for t in range(STEPS):
        state = step(state, actions[t])
        np.testing.assert_allclose(ours.reward[t], state.reward, rtol=1e-6)
        np.testing.assert_allclose(ours.obs[t], state.obs, rtol=1e-6)
        np.testing.assert_allclose(ours.metrics["upright"][t], state.metrics["reward/upright"], rtol=1e-6)
    assert sorted(ours.metrics) == [
        "angle_in_bounds",
        "cart_in_bounds",
        "centered",
        "small_control",
        "small_velocity",
        "upright",
    ]
    # the time limit truncates (its future has value); nothing terminated
    np.testing.assert_array_equal(ours.truncated, [0, 0, 1])
    np.testing.assert_array_equal(ours.terminated, [0, 0, 0])
    np.testing.assert_array_equal(ours.done, [0, 0, 1])


def test_the_observation_size_comes_from_the_construction_without_another_trace(monkeypatch):
    env = envs.make(CARTPOLE, episode_length=STEPS)
    traced, reset = [], type(env).reset  # on the class: a new bound method each time, as unpatched
    monkeypatch.setattr(type(env), "reset", lambda self, rng: traced.append(rng) or reset(self, rng))
    sizes = (env.observation_size, env.observation_size)
    assert not traced
    assert sizes == (jax.eval_shape(env.reset, jax.random.key(0)).obs.shape[-1],) * 2


def test_playground_done_is_a_termination(cartpole):
    state = jax.jit(cartpole.reset)(jax.random.key(0))
    broken = state.replace(pipeline_state=state.pipeline_state.replace(qvel=jnp.full(2, jnp.nan)))
    stepped = jax.jit(rollout, static_argnums=0)(cartpole, jnp.zeros((STEPS, 1)), broken)
    assert (float(stepped.terminated[0]), float(stepped.truncated[0])) == (1.0, 0.0)


@pytest.mark.parametrize("name", [CARTPOLE, PENDULUM])
def test_the_eight_step_policy_gradient_is_finite_from_states_where_mjx_alone_gives_nan(name):
    env = envs.make(name)
    start = jax.jit(env.reset)(jax.random.key(0))

    def window_return(weights):  # the reward and the observation: the pendulum's reward is flat where it starts
        def body(state, _):
            state = env.step(state, jnp.tanh(weights @ state.obs))
            return state, state.reward + state.obs.sum()

        return jax.lax.scan(body, start, None, length=8)[1].sum()

    # 0.01 x N(0, 1) weights: the policy under which the cart-pole's 32-step gradient was NaN without the bridge
    weights = 0.01 * jax.random.normal(jax.random.key(1), (env.action_size, env.observation_size))
    gradient = jax.jit(jax.grad(window_return))(weights)
    assert np.isfinite(gradient).all() and np.abs(gradient).sum() > 0


def test_ahac_trains_on_a_playground_task():  # SAPO: the pendulum's run below
    trainer = make_algorithm(tiny_configs.AHAC, envs.make(CARTPOLE, episode_length=20))
    state = jax.jit(trainer.init)(jax.random.key(0))
    epoch = jax.jit(trainer.epoch)
    for _ in range(2):
        state, metrics = epoch(state)
    assert float(metrics["actor/skipped"]) == 0.0 and np.isfinite(float(metrics["actor/grad_norm"]))


def test_straight_through_smoothing_keeps_playground_forward_values(cartpole):
    smoothed = envs.make(CARTPOLE, episode_length=STEPS, smoothing=Smoothing(mode="straight_through"))
    actions = jnp.array([[1.0], [-0.5], [0.25]])
    run = jax.jit(rollout, static_argnums=0)
    np.testing.assert_allclose(run(smoothed, actions).obs, run(cartpole, actions).obs, rtol=1e-6)


def test_straight_through_differentiates_a_randomised_model_under_vmap():
    """The pattern of `launch/diagnose.py`: per-seed vjps under `vmap`, their pullbacks vmapped too. (The
    pendulum's reward is flat where it starts, so the hinge's speed is differentiated.) The pendulum has
    no contacts to soften, so its straight-through derivative is exactly the physical one."""
    randomization = {"joint:hinge:damping": (0.05, 0.2)}

    def jacobians(mode):
        env = envs.make(PENDULUM, episode_length=STEPS, smoothing=Smoothing(mode=mode), randomization=randomization)

        def per_seed(key):
            state = env.reset(key)

            def speeds(actions):
                return rollout(env, actions, state).pipeline_state.qvel[:, 0]

            _, pullback = jax.vjp(speeds, jnp.full((STEPS, 1), 0.3))
            return jax.vmap(pullback)(jnp.eye(STEPS))[0]  # [STEPS, STEPS, 1]: d speed_t / d action_s

        return jax.jit(jax.vmap(per_seed))(jax.random.split(jax.random.key(0), 2))

    physical, straight = jacobians("none"), jacobians("straight_through")
    assert np.isfinite(straight).all() and np.abs(straight).max() > 0
    np.testing.assert_allclose(straight, physical, rtol=1e-5, atol=1e-7)


def test_randomised_damping_reaches_playground_step():
    def fall(damping):
        env = envs.make(PENDULUM, randomization={"joint:hinge:damping": (damping, damping * 1.0001)})
        return float(jax.jit(rollout, static_argnums=0)(env, jnp.zeros((2, 1))).pipeline_state.qvel[-1, 0])

    assert abs(fall(0.01) - fall(5.0)) > 1e-3  # the hinge's nominal damping is 0.1: the same start falls differently


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("playground/CartpoleSwingupp", {}, r"unknown Playground task 'CartpoleSwingupp'; close matches: "),
        (CARTPOLE, {"config_overrides": {"impl": "warp"}}, r"impl='warp' .* only impl='jax' .* has gradients"),
        (CARTPOLE, {"physics": {"joint:*:damping": 0.1}}, r"env.physics is not supported for Playground task"),
        (CARTPOLE, {"unroll_substeps": True}, r"env.unroll_substeps is not supported for Playground task"),
        (CARTPOLE, {"obs_key": "state"}, r"env.obs_key='state' given, but .* observes one array"),
        (CARTPOLE, {"reward_margin": -1.0}, r"reward_margin must be a finite number >= 0 \(0: off\), got -1.0"),
        ("cartpole_swingup", {"reward_margin": 1.0}, r"bad options .* for env 'cartpole_swingup': .*reward_margin"),
        (
            "playground/ReacherEasy",
            {"config_overrides": {"vision": True}},
            r"Playground task 'ReacherEasy' cannot be built: NotImplementedError: Vision not implemented",
        ),
    ],
)
def test_bad_input_fails_in_one_line(name, options, message):
    with pytest.raises(ConfigError, match=message) as error:
        make_env(EnvConfig(name=name, **options))
    assert "\n" not in str(error.value)


def test_the_reacher_builds_though_its_version_check_calls_a_method_mujoco_removed():
    import mujoco

    env = envs.make("playground/ReacherHard")
    assert env.task == "ReacherHard" and env.action_size == 2
    assert not hasattr(mujoco.MjSpec, "find_body")  # the alias lives only while Playground builds the task


def test_an_unknown_task_lists_close_matches():
    with pytest.raises(ConfigError, match=r"close matches: playground/CartpoleSwingup, "):
        EnvConfig(name="playground/CartpoleSwingupp")


def test_a_task_without_its_menagerie_models_names_them_and_how_playground_fetches_them(monkeypatch, tmp_path):
    monkeypatch.setattr(bridge, "playground_menagerie_path", lambda playground: tmp_path / "mujoco_menagerie")
    task = registry.locomotion.ALL_ENVS[0]
    with pytest.raises(FileNotFoundError, match=rf"'{task}' needs MuJoCo Menagerie.*git-clones") as error:
        envs.make(f"playground/{task}")
    assert "\n" not in str(error.value)
    assert private_apis.playground_menagerie_path(sys.modules["mujoco_playground"]).name == "mujoco_menagerie"


def test_without_playground_installed_the_error_says_which_pip_install_adds_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_playground", None)  # import fails as if not installed
    bridge.task_class.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"need MuJoCo Playground: pip install \"shac\[playground\]\""):
            EnvConfig(name="playground/HopperHop")
    finally:
        bridge.task_class.cache_clear()


TINY = [
    "env=playground",
    "env.episode_length=40",
    "algo.num_envs=4",
    "algo.horizon=8",
    "algo.max_epochs=4",
    "algo.critic_iterations=2",
    "algo.critic_minibatches=2",
    "algo.actor_hidden=[8]",
    "algo.critic_hidden=[8]",
    "eval.every=4",
    "eval.episodes=2",
    "checkpoint.every=2",
    "logger=disabled",
    "logger.progress=false",
]


RUNS = {CARTPOLE: "shac", PENDULUM: "sapo"}
"""The task of each command-line run and its algorithm: SHAC and SAPO each train one task."""


@pytest.fixture(scope="module", params=list(RUNS))
def trained(request, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("playground_run")
    args = ["launch/train.py", f"algo={RUNS[request.param]}", *TINY, f"env.name={request.param}"]
    last = run_cli(*args, f"hydra.run.dir={run_dir}")
    return run_dir, json.loads(last.strip().splitlines()[-1])


def test_a_run_trains_and_evaluates_in_a_new_process(trained):
    run_dir, summary = trained
    assert (summary["epoch"], summary["env_steps"]) == (4, 4 * 4 * 8)
    assert np.isfinite(summary["eval/mean_return"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(r["actor/skipped"] == 0.0 for r in records)  # every actor update had a finite gradient
    config = load_config(run_dir)
    name = config.env.name
    assert config.algo.name == RUNS[name]
    terms = {CARTPOLE: {"reward/upright", "reward/centered"}, PENDULUM: set()}  # the pendulum logs no terms
    assert terms[name] <= records[-1].keys()
    evaluated = json.loads(run_cli("launch/evaluate.py", f"run_dir={run_dir}", "episodes=2").strip().splitlines()[-1])
    assert (evaluated["episodes"], evaluated["mean_length"], evaluated["terminated"]) == (2, 40.0, 0.0)
    assert 0.0 <= evaluated["mean_return"] <= 40.0  # dm_control rewards are in [0, 1] per step


# export and resume recreate the task from the run directory as evaluation does: one task is enough
@pytest.mark.parametrize("trained", [CARTPOLE], indirect=True)
def test_a_run_exports_in_a_new_process(trained):
    run_dir, _ = trained
    exported = json.loads(Path(run_cli("launch/export.py", f"run_dir={run_dir}").strip().splitlines()[-1]).read_text())
    assert (exported["env"], exported["obs_size"], exported["action_size"]) == (
        CARTPOLE,
        envs.make(CARTPOLE).observation_size,
        1,
    )


@pytest.mark.parametrize("trained", [CARTPOLE], indirect=True)
def test_a_resumed_run_ends_in_the_same_state(trained, tmp_path):
    run_dir, _ = trained
    resumed = tmp_path / "resumed"
    shutil.copytree(run_dir, resumed)
    shutil.rmtree(resumed / "checkpoints" / "4")
    lines = (resumed / "metrics.jsonl").read_text().splitlines()
    (resumed / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    run_cli("launch/train.py", f"resume={resumed}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        config = load_config(run_dir)
        shac = make_algorithm(config.algo, make_env(config.env))  # the two runs' shapes: one env construction
        expected, actual = (checkpoint_arrays(run, 4, shac) for run in (run_dir, resumed))
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


def test_brax_training_wrappers_reset_it_with_raw_keys_across_the_time_limit():
    from brax.envs import training

    wrapped = training.wrap(envs.make(CARTPOLE, episode_length=STEPS), episode_length=STEPS)  # brax PPO's wrappers
    state = jax.jit(wrapped.reset)(jax.random.split(jax.random.PRNGKey(0), 2))
    step = jax.jit(wrapped.step)
    dones = []
    for _ in range(STEPS + 1):
        state = step(state, jnp.zeros((2, 1)))
        dones.append(state.done.tolist())
    assert dones == [[0, 0], [0, 0], [1, 1], [0, 0]]  # auto-reset at the time limit, then a new episode
    assert state.info["steps"].tolist() == [1, 1]


def test_a_tolerance_with_an_infinite_bound_has_a_finite_gradient_inside_the_bridge():
    from mujoco_playground._src import reward  # the function the walker's and humanoid's standing reward call

    def standing(height):  # the walker's: 1 above 1.2 m, a Gaussian decay over 0.6 m below
        return reward.tolerance(height, bounds=(1.2, float("inf")), margin=0.6)

    heights = jnp.array([1.5, 1.0])  # standing (inside the bounds), and crouched
    assert np.isnan(jax.vmap(jax.grad(standing))(heights)[0])  # Playground's own
    with private_apis.playground_tolerance_wrapped(
        sys.modules["mujoco_playground"], lambda original: functools.partial(bridge.safe_tolerance, original)
    ):
        values, grads = jax.vmap(jax.value_and_grad(standing))(heights)
    np.testing.assert_allclose(values, jax.vmap(standing)(heights))  # the same values
    assert grads[0] == 0.0 and grads[1] > 0.0  # flat inside, rising toward the bound below it


def test_a_surrogate_margin_keeps_a_flat_tolerance_value_and_gives_the_long_tail_gradient():
    from mujoco_playground._src import reward

    safe = functools.partial(bridge.safe_tolerance, reward.tolerance)
    surrogate = functools.partial(bridge.surrogate_margin_tolerance, safe, 1.0)

    def between(x):  # 1 on [0, 0.5], exactly 0 outside: no margin
        return surrogate(x, bounds=(0.0, 0.5))

    def above(x):  # 1 above 0.6
        return surrogate(x, bounds=(0.6, float("inf")))

    def with_margin(x):  # a margin of its own: untouched
        return surrogate(x, bounds=(0.0, 1.0), margin=0.5)

    xs = jnp.array([1.5, 0.25, -1.0])
    values, grads = jax.vmap(jax.value_and_grad(between))(xs)
    np.testing.assert_array_equal(values, jax.vmap(lambda x: reward.tolerance(x, bounds=(0.0, 0.5)))(xs))
    # margin 1, long tail, value 0.1 at the margin: 1 / (1 + (3 d)^2) at a distance d; its slope -18 d / (1 + 9 d^2)^2
    np.testing.assert_allclose(grads, [-18 / 100, 0.0, 18 / 100], rtol=1e-6)
    value, grad = jax.value_and_grad(above)(jnp.array(0.1))  # d = 0.5: 9 / 3.25^2
    assert float(value) == 0.0 and grad == pytest.approx(9 / 3.25**2, rel=1e-6)
    np.testing.assert_array_equal(
        jax.vmap(jax.grad(with_margin))(xs),
        jax.vmap(jax.grad(lambda x: safe(x, bounds=(0.0, 1.0), margin=0.5)))(xs),
    )


def test_a_reward_margin_gives_the_pendulum_a_gradient_where_its_reward_is_flat_and_keeps_its_rewards():
    def rewards_and_gradient(env):  # per start of 8: the rewards of 4 steps at zero action, and their gradient
        def window(key):
            start = env.reset(key)

            def rewards(actions):
                def body(state, action):
                    state = env.step(state, action)
                    return state, state.reward

                return jax.lax.scan(body, start, actions)[1]

            actions = jnp.zeros((4, env.action_size))
            return rewards(actions), jax.grad(lambda a: rewards(a).sum())(actions)

        return jax.vmap(window)(jax.random.split(jax.random.key(0), 8))

    flat, flat_gradient = jax.jit(rewards_and_gradient, static_argnums=0)(envs.make(PENDULUM))
    rewards, gradient = jax.jit(rewards_and_gradient, static_argnums=0)(envs.make(PENDULUM, reward_margin=1.0))
    away = np.asarray(flat).sum(axis=1) == 0  # starts away from upright: the reward is exactly 0 for all 4 steps
    assert away.any() and (np.asarray(flat_gradient)[away] == 0).all()
    np.testing.assert_array_equal(rewards, flat)
    assert np.isfinite(gradient).all() and (np.abs(np.asarray(gradient)[away]).sum(axis=(1, 2)) > 0).all()
