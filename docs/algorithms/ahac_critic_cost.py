"""What AHAC's critic fit costs on the Ant: over the steps simulated, against over the whole buffer.

    python docs/algorithms/ahac_critic_cost.py

AHAC compiles its window at the longest horizon (`algo.horizon`, 64 steps) and simulates the first
round(H) of them (8 at the start, `ahac.min_horizon`). Its critic passes go over the steps simulated
only (`Ahac.critic_pass`); before, they went over the whole buffer with the unsimulated samples
weighted 0 (`Shac.critic_pass`, kept here as `WholeBuffer`). For `env=ant algo=ahac` with the
Ant's two 128 x 128 critics and with two 256 x 256, at the first epoch's window (8 steps), this
times, alternating the calls, the median of REPEATS of:

- critic_fit_s: the critic step alone (targets and every minibatch of every pass);
- epoch_s: the whole AHAC epoch (window, gradient, actor step, critic fit, horizon update);

each with the pass over the simulated samples and over the whole buffer. The critics' fit runs its
cap of 16 passes in both (`ahac.critic_tolerance=0`), so the two do the same number of updates.
Results go to docs/benchmarks/ahac_critic_cost_ant.json.
"""

import json
from pathlib import Path

from launch.runtime import configure_runtime

configure_runtime()

import jax  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from shac.config import make_env, to_train_config  # noqa: E402
from shac.core.ahac import Ahac  # noqa: E402
from shac.core.algorithm import Shac  # noqa: E402
from shac.run.hydra_config import register_configs, split_launch_config  # noqa: E402
from shac.tools.benchmarks.throughput import epoch_parts, median_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "docs" / "benchmarks" / "ahac_critic_cost_ant.json"
REPEATS = 20
CRITICS = {"128x128": "[128,128]", "256x256": "[256,256]"}


class WholeBuffer(Ahac):
    """AHAC with the critic pass it had before: every sample of the buffer, the unsimulated ones weighted 0."""

    critic_pass = Shac.critic_pass


def ant_config(critic_hidden: str):
    register_configs()
    overrides = ["env=ant", "algo=ahac", f"algo.critic_hidden={critic_hidden}", "algo.ahac.critic_tolerance=0"]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        return to_train_config(split_launch_config(compose(config_name="config", overrides=overrides))[0])


def measure(critic_hidden: str) -> dict:
    config = ant_config(critic_hidden)
    env = make_env(config.env, config.randomization, config.smoothing)
    calls = {}
    for name, cls in (("simulated", Ahac), ("whole_buffer", WholeBuffer)):
        ahac = cls(config.algo, env)
        state = jax.block_until_ready(jax.jit(ahac.init)(jax.random.key(0)))
        epoch = jax.jit(ahac.epoch).lower(state).compile()
        critic_fit, critic_args = epoch_parts(ahac, state)["critic_fit"]
        calls[f"epoch_s/{name}"] = (epoch, (state,))
        calls[f"critic_fit_s/{name}"] = (critic_fit, critic_args)
    result = median_seconds(calls, REPEATS)
    for part in ("epoch_s", "critic_fit_s"):
        result[f"{part}/ratio"] = result[f"{part}/whole_buffer"] / result[f"{part}/simulated"]
    return result


def main() -> None:
    results = {}
    for label, hidden in CRITICS.items():
        results[label] = measure(hidden)
        r = results[label]
        print(
            f"{label}: critic fit {r['critic_fit_s/simulated'] * 1e3:.0f} ms over the simulated samples, "
            f"{r['critic_fit_s/whole_buffer'] * 1e3:.0f} ms over the whole buffer ({r['critic_fit_s/ratio']:.2f}x); "
            f"epoch {r['epoch_s/simulated'] * 1e3:.0f} ms against {r['epoch_s/whole_buffer'] * 1e3:.0f} ms "
            f"({r['epoch_s/ratio']:.2f}x)",
            flush=True,
        )
    OUTPUT.write_text(json.dumps({"device": str(jax.devices()[0]), "repeats": REPEATS, **results}, indent=2) + "\n")
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
