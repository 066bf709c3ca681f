"""SHAC (and AHAC, SAPO), brax APG and brax PPO trained on one environment under the same wall-clock budget.

Each method is evaluated at regular intervals with the same deterministic
evaluation (`shac.run.evaluate.evaluate_policy`: the squashed mean action, full
episodes, the same initial states at the k-th evaluation of every method), on
the same registered environment object. The brax methods train it through
brax's own wrappers (`brax.envs.training.wrap`), with brax's own evaluation on
as by default (its result is not used). Training time is measured by
`BudgetClock` (every evaluation and compilation excluded); a run stops at the
first evaluation after its budget is spent.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import jax
import jax.numpy as jnp
from brax.training.agents.apg import networks as apg_networks
from brax.training.agents.apg import train as apg_train
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo_train

from envs import MjxEnv
from envs.private_apis import brax_apg_evaluations
from shac.config import AlgoConfig
from shac.core.algorithm import TrainState
from shac.core.algorithms import make_algorithm
from shac.core.networks import act
from shac.run.budget import TrainingClock
from shac.run.evaluate import evaluate_policy
from shac.tools.benchmarks.clock import BudgetClock, BudgetSpent
from shac.tools.benchmarks.config import APGConfig, PPOConfig

MAX_INTERVALS = 100_000
"""Evaluation intervals the brax methods are sized for; the budget always stops them long before."""


@dataclass(frozen=True)
class Record:
    """One evaluation of one method's run.

    Attributes:
        method: shac, ahac, sapo, apg or ppo.
        config: the name of the method's configuration (configs/peers/<env>.yaml; shac, ahac, sapo: "paper").
        seed: the run's seed.
        env_steps: environment steps trained on so far.
        wall_time_s: training seconds so far (compilation and evaluation excluded).
        eval_return: mean undiscounted return of the evaluation episodes.
        eval_std: their standard deviation.
    """

    method: str
    config: str
    seed: int
    env_steps: int
    wall_time_s: float
    eval_return: float
    eval_std: float


@dataclass(frozen=True)
class RunResult:
    """A finished run: its evaluations and how its time was counted.

    Attributes:
        records: the evaluations, the untrained policy's first (at 0 s, 0 steps).
        compile_s: the first interval's excess over the second, left out of `wall_time_s`.
        laps_s: raw seconds of each training interval between evaluations.
    """

    records: list[Record]
    compile_s: float | None
    laps_s: list[float]

    def to_json(self) -> dict:
        return {"records": [asdict(r) for r in self.records], "compile_s": self.compile_s, "laps_s": self.laps_s}


class Recorder:
    """The evaluation callback every method's training loop calls between intervals.

    Each call ends the running lap, evaluates the policy, and raises
    `BudgetSpent` once the clock's budget is used up; otherwise it starts the
    next lap, or leaves that to a later `resume()` (when the training loop
    does more untimed work first, such as brax PPO's own evaluation).

    Args:
        env: the environment evaluated (unwrapped).
        method: the method's name, for the records.
        config: the name of the method's configuration, for the records.
        seed: the run's seed; the k-th evaluation's initial states come from (seed, k) alone.
        budget_s: training seconds the run may use.
        episodes: episodes per evaluation.
        make_policy: parameters -> deterministic policy (raw obs float32 [E, obs_dim]
            -> actions float32 [E, action_dim]); jitted with the parameters as argument.
    """

    def __init__(
        self,
        env: MjxEnv,
        method: str,
        config: str,
        seed: int,
        budget_s: float,
        episodes: int,
        make_policy: Callable[[Any], Callable[[jax.Array], jax.Array]],
    ):
        self.method, self.config, self.seed = method, config, seed
        self.clock = BudgetClock(budget_s)
        self.key = jax.random.key(seed)
        self.raw: list[tuple[int, float, float]] = []

        def returns(params, key):
            return evaluate_policy(env, make_policy(params), key, episodes).returns

        self._evaluate = jax.jit(returns)

    def __call__(self, env_steps: int, params: Any, resume: bool = True) -> None:
        if self.raw:
            self.clock.lap()
        returns = self._evaluate(params, jax.random.fold_in(self.key, len(self.raw)))
        self.raw.append((int(env_steps), float(jnp.mean(returns)), float(jnp.std(returns))))
        if self.clock.spent():
            raise BudgetSpent
        if resume:
            self.clock.resume()

    def resume(self) -> None:
        """Starts the next lap after a call with `resume=False`."""
        self.clock.resume()

    def result(self) -> RunResult:
        """The records, with training time from the clock (the k-th evaluation after k laps)."""
        records = [
            Record(
                method=self.method,
                config=self.config,
                seed=self.seed,
                env_steps=steps,
                wall_time_s=self.clock.elapsed(k),
                eval_return=mean,
                eval_std=std,
            )
            for k, (steps, mean, std) in enumerate(self.raw)
        ]
        return RunResult(records=records, compile_s=self.clock.compile_s, laps_s=list(self.clock.laps))


def retime(run: dict) -> dict:
    """A run of a results.json (records, compile_s, laps_s) with its times recomputed from its laps by
    `BudgetClock` (the same times for a run measured with this code; updated ones for older runs)."""
    clock = BudgetClock(budget_s=1.0)
    clock.laps = list(run["laps_s"])
    records = [{**record, "wall_time_s": clock.elapsed(k)} for k, record in enumerate(run["records"])]
    return {**run, "records": records, "compile_s": clock.compile_s}


def train_shac(
    env: MjxEnv, config: AlgoConfig, seed: int, budget_s: float, episodes: int, eval_every_steps: int
) -> RunResult:
    """SHAC, or the successor `config.name` names, with `config`, evaluated every `eval_every_steps`
    (whole epochs; AHAC's shorter windows count the steps they simulate). Under `config.budget_minutes`
    each epoch's wall time goes into `TrainState.train_seconds`, as in `launch/train.py`."""
    shac = make_algorithm(config, env)
    clock = TrainingClock(config.budget_minutes)

    def make_policy(params):
        actor_params, normalizer = params

        return functools.partial(act, shac.actor, actor_params, normalizer)

    recorder = Recorder(env, config.name, "paper", seed, budget_s, episodes, make_policy)
    state = jax.jit(shac.init)(jax.random.key(seed))
    epoch = jax.jit(shac.epoch)

    def train_epoch(state: TrainState) -> TrainState:
        began = time.perf_counter()
        state, _ = epoch(state)
        jax.block_until_ready(state.env_steps)
        clock.epoch_done(time.perf_counter() - began)
        return state if clock.budget_s is None else state.replace(train_seconds=jnp.float32(clock.trained_s))

    with contextlib.suppress(BudgetSpent):
        recorder(0, (state.actor_params, state.normalizer))
        while True:
            next_evaluation = int(state.env_steps) + eval_every_steps
            while int(state.env_steps) < next_evaluation:  # AHAC's epochs simulate a varying number of steps
                state = train_epoch(state)
            recorder(int(state.env_steps), (state.actor_params, state.normalizer))
    return recorder.result()


def _brax_policy(brax_policy_factory: Callable) -> Callable[[Any], Callable[[jax.Array], jax.Array]]:
    """brax's `make_policy(params, deterministic=True)` as a parameters -> (obs -> action) factory."""

    def make_policy(params):
        policy = brax_policy_factory(params, deterministic=True)
        return lambda obs: policy(obs, jax.random.key(0))[0]

    return make_policy


def train_ppo(
    env: MjxEnv, config: PPOConfig, seed: int, budget_s: float, episodes: int, name: str = "ppo"
) -> RunResult:
    """brax PPO with `config` (named `name`), evaluated (by us) from its `policy_params_fn` callback.

    brax's own evaluation (on, as by default, with one episode) runs right
    after that callback; the clock resumes only after it, from `progress_fn`.
    """
    steps_per_training_step = config.batch_size * config.unroll_length * config.num_minibatches
    training_steps_per_eval = -(-config.eval_every_steps // steps_per_training_step)
    recorder: Recorder | None = None

    def on_params(env_steps: int, make_policy: Callable, params: Any) -> None:
        nonlocal recorder
        if recorder is None:
            recorder = Recorder(env, "ppo", name, seed, budget_s, episodes, _brax_policy(make_policy))
        recorder(env_steps, params, resume=env_steps == 0)  # brax evaluates after each later call

    def on_progress(env_steps: int, metrics: dict) -> None:
        del metrics
        if env_steps > 0:
            recorder.resume()

    network_factory = functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=config.policy_hidden,
        value_hidden_layer_sizes=config.value_hidden,
    )
    with contextlib.suppress(BudgetSpent):
        ppo_train.train(
            environment=env,
            num_timesteps=MAX_INTERVALS * training_steps_per_eval * steps_per_training_step,
            num_evals=MAX_INTERVALS + 1,
            num_eval_envs=1,
            episode_length=env.episode_length,
            num_envs=config.num_envs,
            batch_size=config.batch_size,
            num_minibatches=config.num_minibatches,
            unroll_length=config.unroll_length,
            num_updates_per_batch=config.num_updates_per_batch,
            discounting=config.discounting,
            learning_rate=config.learning_rate,
            entropy_cost=config.entropy_cost,
            reward_scaling=config.reward_scaling,
            max_grad_norm=config.max_grad_norm,
            normalize_observations=True,
            network_factory=network_factory,
            seed=seed,
            policy_params_fn=on_params,
            progress_fn=on_progress,
        )
    return recorder.result()


def apg_arguments(env: MjxEnv, config: APGConfig, seed: int) -> dict:
    """The keyword arguments of `brax.training.agents.apg.train` for `config` (all but the update and
    evaluation counts)."""
    return {
        "environment": env,
        "episode_length": env.episode_length,
        "horizon_length": config.horizon_length,
        "num_envs": config.num_envs,
        "learning_rate": config.learning_rate,
        "schedule_decay": config.schedule_decay,
        "max_gradient_norm": config.max_gradient_norm,
        "normalize_observations": True,
        "deterministic_eval": True,
        "network_factory": functools.partial(apg_networks.make_apg_networks, hidden_layer_sizes=config.hidden),
        "seed": seed,
    }


def train_apg(
    env: MjxEnv, config: APGConfig, seed: int, budget_s: float, episodes: int, name: str = "apg"
) -> RunResult:
    """brax APG with `config` (named `name`), evaluated (by us) where brax would evaluate
    (`private_apis.brax_apg_evaluations`)."""
    steps_per_update = config.num_envs * config.horizon_length
    updates_per_eval = -(-config.eval_every_steps // steps_per_update)
    recorder: Recorder | None = None

    def on_evaluation(params: Any, make_policy: Callable, training_metrics: dict) -> None:
        nonlocal recorder
        del training_metrics
        if recorder is None:
            recorder = Recorder(env, "apg", name, seed, budget_s, episodes, _brax_policy(make_policy))
        recorder(len(recorder.raw) * updates_per_eval * steps_per_update, params)

    with contextlib.suppress(BudgetSpent), brax_apg_evaluations(on_evaluation):
        apg_train.train(
            **apg_arguments(env, config, seed),
            policy_updates=MAX_INTERVALS * updates_per_eval,
            num_evals=MAX_INTERVALS + 1,
        )
    return recorder.result()
