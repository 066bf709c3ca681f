"""The misfit of a right model on signals as sensors give them: quantized encoders, filtered velocities.

    python docs/sysid/misfit_on_sensor_data.py

One 10 s recording of the pendulum (damping 0.137, smooth random torques, sampled every 10 ms),
measured four ways: with white noise (1e-3 rad, 1e-2 rad/s, as the coverage benchmark measures);
by an encoder of 4,096 counts per turn, the velocity its central difference; the same velocity
through a first-order low-pass filter (y_k = 0.7 y_(k-1) + 0.3 x_k); and the white-noise
recording with that filter on its velocity. Each is fitted from the true model (finite
differences, no spread starts), first with the noise estimated (the misfit compares the residuals
with the third differences of the data), then with the noise given (the misfit compares them with
it): the encoder's quantization step / sqrt(12) for the position, and for the velocity the rms of
its error against the true velocity, what a calibration against a reference sensor would state;
then with the velocity left out (nan: not measured, the positions alone fitted, their noise
estimated). Per fit: the damping, whether it converged, the misfit (sound at most 3) and the noise it
compares with ("-": a velocity not measured).
"""

import dataclasses

import numpy as np

from launch.runtime import configure_runtime

configure_runtime()

import envs  # noqa: E402
from shac.sysid import coverage  # noqa: E402
from shac.sysid.fit import Problem, fit  # noqa: E402

DAMPING = "joint:hinge:damping"
DT, SECONDS, COUNTS = 0.01, 10.0, 4096


def low_pass(x: np.ndarray, a: float = 0.7) -> np.ndarray:
    """[T, n] a first-order low-pass filter along time: y_k = a y_(k-1) + (1 - a) x_k."""
    y = np.array(x, copy=True)
    for k in range(1, len(y)):
        y[k] = a * y[k - 1] + (1 - a) * x[k]
    return y


def main() -> None:
    true_model, guess_model = coverage.models(envs.make("pendulum_swingup").mj_model, {DAMPING: 0.137}, {})
    start = lambda rng: (np.pi + rng.uniform(-0.2, 0.2, 1), rng.uniform(-0.2, 0.2, 1))  # noqa: E731

    def recording(qpos_noise: float, qvel_noise: float):
        return coverage.simulate(
            true_model, (DAMPING,), start, np.random.default_rng(3), DT, SECONDS, 1.0,
            (qpos_noise, qpos_noise), (qvel_noise, qvel_noise),
        ).data  # fmt: skip

    noisy, exact = recording(1e-3, 1e-2), recording(1e-12, 1e-12)  # the same motion: the same seed
    step = 2 * np.pi / COUNTS
    encoder = np.round(exact.qpos / step) * step
    differenced = np.gradient(encoder, DT, axis=0)
    variants = {
        "white noise": noisy,
        "encoder, central difference": dataclasses.replace(exact, qpos=encoder, qvel=differenced),
        "encoder, filtered difference": dataclasses.replace(exact, qpos=encoder, qvel=low_pass(differenced)),
        "white noise, filtered velocity": dataclasses.replace(noisy, qvel=low_pass(noisy.qvel)),
    }
    print("| signals | noise | damping (truth 0.137) | converged | misfit | noise compared with (qpos, qvel) |")
    print("|---|---|---|---|---|---|")
    for name, data in variants.items():
        stated_qpos = step / np.sqrt(12) if "encoder" in name else 1e-3
        stated_qvel = float(np.sqrt(np.mean((data.qvel - exact.qvel) ** 2)))
        blind = dataclasses.replace(data, qvel=np.full_like(data.qvel, np.nan))
        ways = (
            ("estimated", None, data),
            ("given", (stated_qpos, stated_qvel), data),
            ("velocity left out", None, blind),
        )
        for source, noise, recorded in ways:
            problem = Problem(guess_model, (DAMPING,), recorded, noise=noise)
            result = fit(problem, steps=50, method="finite_difference", spread_fits=0)
            compared = ", ".join(f"{n:.2g}" if np.isfinite(n) else "-" for n in problem.data_noise[0])
            print(
                f"| {name} | {source} | {result.values[0]:.4g} | {'yes' if result.converged else 'no'} | "
                f"{result.misfit:.3g} | {compared} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
