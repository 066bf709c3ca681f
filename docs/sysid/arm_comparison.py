"""The arm comparison against mujoco.sysid as a benchmark's results.json recorded it, for the scripts beside this
file: the truth, the initial guesses, the bounds and the recordings, simulated again from the same seeds."""

import json
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

import envs
from shac.sysid import coverage, versus_mujoco
from shac.sysid.coverage import Recording
from shac.sysid.parameters import Bounds, parse_assignments

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


@dataclass
class ArmComparison:
    """options: the benchmark's sysid options; keys [P] and truth [P]: the fitted parameters and their true values;
    limits: each key's bounds; spec: the arm's MJCF spec (mujoco.sysid's)."""

    options: dict
    keys: tuple[str, ...]
    truth: np.ndarray
    true_model: mujoco.MjModel
    guess_model: mujoco.MjModel
    limits: dict[str, Bounds]
    spec: mujoco.MjSpec
    initial_state: object

    @classmethod
    def load(cls, results: str) -> "ArmComparison":
        """From docs/benchmarks/<results>/results.json."""
        options = json.loads((BENCHMARKS / results / "results.json").read_text())["options"]
        true_values, initial_values = parse_assignments(options["true_params"]), parse_assignments(options["init"])
        keys = tuple(true_values)
        env = envs.make("arm_reach")
        true_model, guess_model = versus_mujoco.models(env, true_values, initial_values, options["upper"])
        limits = dict(zip(keys, versus_mujoco.bounds(guess_model, keys, options["upper"]), strict=True))
        truth = np.array([true_values[key] for key in keys])
        return cls(options, keys, truth, true_model, guess_model, limits, env.mjcf_spec(), coverage.reset_states(env))

    def recording(self, k: int) -> Recording:
        """Dataset k, as the benchmark simulated it (seed [0, k])."""
        options = self.options
        return coverage.simulate(
            self.true_model,
            self.keys,
            self.initial_state,
            np.random.default_rng([0, k]),
            options["dt"],
            options["seconds"],
            options["max_hz"],
            tuple(options["qpos_noise"]),
            tuple(options["qvel_noise"]),
        )
