"""System identification: fitting a model's physical parameters to recorded trajectories.

- `parameters`: what is sysid-specific about the parameters (bounds, `key=value` values);
  model parameters' names are resolved and written by `envs.physics.parameters`, `signal:`
  ones (the control delay) by `signals`.
- `recording`: the recorded trajectory format and its checks, simulation with MuJoCo's C
  simulator, synthetic recordings and excitation signals.
- `columns`: a robot's own CSV log (its column names and units) read through a column map.
- `signals`: the controls the model receives: recorded commands under a control delay
  (`signal:ctrl:delay`), the same in MJX and MuJoCo's C simulator.
- `noise`: the measurement noise model and its estimates.
- `least_squares`: Levenberg-Marquardt with an arrow-structured normal matrix.
- `fit`: the multiple-shooting problem (segments, residuals, Jacobians) and the fit.
- `contacts`: the contact-free stretches of a recording (a legged robot's body fitted in flight).
- `report`: what the data determines (information-matrix analysis, flags, the advice on the
  excitation that would resolve each, summary lines, loss-landscape figure).
- `coverage`: the benchmark of how often the 95% intervals hold the truth.
- `versus_mujoco`: this project's fit against MuJoCo's own `mujoco.sysid` on the same recordings.
- `mjcf`: the identified model written back as MJCF (`identified.xml`).

Modules here may import `envs`, each other, and numerical and plotting libraries (JAX,
MuJoCo, MJX, numpy, matplotlib); nothing else of `shac`, never `launch`.
"""
