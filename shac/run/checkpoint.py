"""Orbax checkpoints of the full training state, for exact resume.

A checkpoint `<run_dir>/checkpoints/<epoch>/` holds two items:

- `state`: every non-empty array of the `TrainState` (parameters, both optimiser
  states, normaliser, the carried environments, episode totals, counters), keyed by
  its pytree path, e.g. `actor_params/params/MLP_0/Dense_0/kernel`. The PRNG key is
  stored as its raw key data and rewrapped on restore. Zero-size arrays (MJX keeps
  some, e.g. `act` of a model without activations) are rebuilt from the shapes.
- `config`: the resolved `TrainConfig` that produced it, as JSON.

The checkpoint's metadata (orbax's custom metadata) holds a checksum of every
saved array (`checksums`), verified on restore: a checkpoint whose bytes changed
on disk is as unreadable as one that cannot be parsed. When a training run
falls back from unreadable checkpoints to an older one, it moves the unreadable
ones to `<run_dir>/unreadable_checkpoints/` so that it can save those epochs again.

Orbax writes each checkpoint into a temporary directory and renames it when it is
complete, so a run killed mid-save never leaves a checkpoint that looks complete;
a writer (a training run) deletes such leftovers when it starts. Saving is
asynchronous: `save` returns once the arrays are on the host and the files are
written in the background.

In a multi-process run every process calls `save` and `restore` (orbax
synchronises them): each writes and reads the shards of the environment batch
on its own devices, and process 0 alone writes the metadata and the config.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from jax.experimental import multihost_utils

from shac.config import CheckpointConfig, TrainConfig
from shac.core.algorithm import TrainState

CHECKPOINT_DIR = "checkpoints"
UNREADABLE_DIR = "unreadable_checkpoints"
PARTIAL_SUFFIX = ocp.path.step.TMP_DIR_SUFFIX
"""Orbax names a checkpoint being written `<epoch>.orbax-checkpoint-tmp[-<time>]` until it is complete."""
Arrays = dict[str, jax.Array]

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint is missing or unreadable; the message names its path."""


class IncompatibleCheckpointError(CheckpointError):
    """The config asks for a training state of other shapes than the checkpoint holds."""


def _name(path: tuple) -> str:
    return jax.tree_util.keystr(path, simple=True, separator="/")


def _with_key_data(state: TrainState) -> TrainState:
    """`state` with its typed PRNG key replaced by the key's raw data (works on abstract states too)."""
    if isinstance(state.key, jax.Array):
        return state.replace(key=jax.random.key_data(state.key))
    data = jax.eval_shape(jax.random.key_data, state.key)
    return state.replace(key=jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=state.key.sharding))


def state_arrays(state: TrainState) -> Arrays:
    """The non-empty arrays of `state` by path name; the PRNG key as its key data."""
    leaves = jax.tree_util.tree_flatten_with_path(_with_key_data(state))[0]
    return {_name(path): leaf for path, leaf in leaves if np.prod(leaf.shape) > 0}


def arrays_to_state(arrays: Arrays, abstract_state: TrainState) -> TrainState:
    """Inverse of `state_arrays`, shaped like `abstract_state` (e.g. from `jax.eval_shape(shac.init, key)`).

    Leaves whose abstract value carries a sharding (`shac.run.parallel.abstract_state`)
    are kept as given (orbax restored them in place) or, if empty, created with
    it. The others come back uncommitted to a device, like those of an
    unsharded `jax.jit(shac.init)`.
    """

    def value(path: tuple, leaf: jax.ShapeDtypeStruct) -> jax.Array:
        sharding = leaf.sharding
        if np.prod(leaf.shape) == 0:
            zeros = np.zeros(leaf.shape, leaf.dtype)
            return jnp.asarray(zeros) if sharding is None else jax.device_put(zeros, sharding)
        array = arrays[_name(path)]
        return jnp.asarray(np.asarray(array)) if sharding is None else array

    leaves, treedef = jax.tree_util.tree_flatten_with_path(_with_key_data(abstract_state))
    state = jax.tree_util.tree_unflatten(treedef, [value(path, leaf) for path, leaf in leaves])
    return state.replace(key=jax.random.wrap_key_data(state.key))


@jax.jit
def _finite(arrays: Arrays) -> dict[str, jax.Array]:
    return {name: jnp.isfinite(x).all() for name, x in arrays.items() if jnp.issubdtype(x.dtype, jnp.floating)}


def _words(x: jax.Array) -> jax.Array:
    """The bits of `x` as uint32 [n] (8-byte elements as two words, 1- and 2-byte ones widened)."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint32).ravel()
    unsigned = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint32}[x.dtype.itemsize]
    return jax.lax.bitcast_convert_type(x, unsigned).astype(jnp.uint32).ravel()


@jax.jit
def _checksums(arrays: Arrays) -> dict[str, jax.Array]:
    """uint32 [] per array: sum_i word_i * (2 i + 1) mod 2^32.

    The multipliers are odd, hence invertible mod 2^32, so any change to a
    single word (a flipped byte or bit) always changes the sum; integer sums are
    exact in any order, so every process and device count gets the same value.
    """

    def checksum(x):
        words = _words(x)
        weights = 2 * jnp.arange(words.size, dtype=jnp.uint32) + 1
        return jnp.sum(words * weights, dtype=jnp.uint32)

    return {name: checksum(x) for name, x in arrays.items()}


def checksums(arrays: Arrays) -> dict[str, int]:
    """A checksum of each array's bytes, reduced on the devices (same answer on every process)."""
    return {name: int(value) for name, value in jax.device_get(_checksums(arrays)).items()}


def nonfinite_arrays(arrays: Arrays) -> list[str]:
    """Names of the floating-point arrays that hold a NaN or an infinity.

    Reduced on the devices, so every process of a multi-process run gets the
    same answer about arrays it holds only a shard of.
    """
    return [name for name, finite in jax.device_get(_finite(arrays)).items() if not finite]


Layout = dict[str, tuple[tuple[int, ...], str]]
"""Array name -> (shape, dtype name)."""


def shape_mismatches(saved: Layout, wanted: Layout) -> list[str]:
    """Human-readable differences between two layouts."""
    problems = []
    for name in sorted(saved.keys() | wanted.keys()):
        if name not in wanted:
            problems.append(f"{name}: in the checkpoint, not in the config's state")
        elif name not in saved:
            problems.append(f"{name}: in the config's state, not in the checkpoint")
        elif saved[name] != wanted[name]:
            problems.append(
                f"{name}: checkpoint {saved[name][0]} {saved[name][1]}, config {wanted[name][0]} {wanted[name][1]}"
            )
    return problems


def config_changes(saved: dict, config: TrainConfig) -> list[str]:
    """`key: old -> new` for each config value that differs from the checkpoint's config."""

    def flat(tree: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in tree.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple | list) else v
        return out

    old, new = flat(saved), flat(dataclasses.asdict(config))
    return [f"{k}: {old.get(k)} -> {new.get(k)}" for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]


class Checkpointer:
    """The checkpoints of one run directory: save, list and restore.

    Args:
        run_dir: the run directory; checkpoints live in `run_dir/checkpoints/`.
        config: when to keep checkpoints; None opens the directory read-only
            (evaluation and export, possibly while training still writes).
    """

    def __init__(self, run_dir: Path, config: CheckpointConfig | None = None):
        self.directory = (Path(run_dir) / CHECKPOINT_DIR).absolute()
        self.writer = config is not None
        if config is None:
            options = ocp.CheckpointManagerOptions(read_only=True, create=False)
        else:
            options = ocp.CheckpointManagerOptions(
                preservation_policy=ocp.checkpoint_managers.LatestN(config.max_to_keep),
                enable_async_checkpointing=True,
            )
            if jax.process_index() == 0:
                self._remove_partial_saves()
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=options,
            item_handlers={"state": ocp.StandardCheckpointHandler(), "config": ocp.JsonCheckpointHandler()},
        )

    def _remove_partial_saves(self) -> None:
        """Deletes what saves cut short left behind (orbax's temporary directories; only a writer may)."""
        for path in sorted(self.directory.glob(f"*{PARTIAL_SUFFIX}*")):
            log.warning("removing the incomplete checkpoint '%s' (a save that did not finish)", path)
            shutil.rmtree(path)

    def steps(self) -> list[int]:
        """Epochs of the complete checkpoints, ascending."""
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def path(self, step: int) -> Path:
        return self.directory / str(step)

    def save(self, state: TrainState, config: TrainConfig) -> bool:
        """Starts saving `state` as the checkpoint of its epoch; returns once the arrays are on the host.

        Refuses (logs an error and returns False) when any floating-point array
        is non-finite, so the newest checkpoint is always one worth resuming.
        """
        step = int(state.epoch)
        arrays = state_arrays(state)
        bad = nonfinite_arrays(arrays)
        if bad:
            shown = ", ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
            log.error("not saving the checkpoint of epoch %d: non-finite values in %s", step, shown)
            return False
        return self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(arrays), config=ocp.args.JsonSave(dataclasses.asdict(config))
            ),
            custom_metadata={"checksums": checksums(arrays)},
            force=True,
        )

    def saved_config(self, step: int) -> dict:
        """The config the checkpoint of `step` was written with, as a plain dict."""
        self._require(step)
        try:
            return self._manager.restore(step, args=ocp.args.Composite(config=ocp.args.JsonRestore()))["config"]
        except Exception as e:
            raise CheckpointError(f"checkpoint '{self.path(step)}' is unreadable: {_first_line(e)}") from e

    def check_compatible(self, step: int, abstract_state: TrainState, config: TrainConfig) -> None:
        """Raises IncompatibleCheckpointError unless `config` yields a state shaped like the checkpoint's.

        Reads only metadata, so it fails before anything compiles.
        """
        self._require(step)
        try:
            metadata = self._manager.item_metadata(step)["state"]
            saved = {name: (tuple(m.shape), np.dtype(m.dtype).name) for name, m in metadata.items()}
        except Exception as e:
            raise CheckpointError(f"checkpoint '{self.path(step)}' is unreadable: {_first_line(e)}") from e
        saved_config = self.saved_config(step)
        wanted = {name: (tuple(x.shape), np.dtype(x.dtype).name) for name, x in state_arrays(abstract_state).items()}
        problems = shape_mismatches(saved, wanted)
        saved_env = saved_config.get("env", {}).get("name")
        if saved_env != config.env.name:
            problems.insert(0, f"env.name: checkpoint '{saved_env}', config '{config.env.name}'")
        if problems:
            changes = config_changes(saved_config, config)
            raise IncompatibleCheckpointError(
                f"cannot resume from '{self.path(step)}': the config changes the training state "
                f"({'; '.join(problems[:3])}{'; ...' if len(problems) > 3 else ''}). "
                f"Config changes: {', '.join(changes) or 'none'}. Keep env, num_envs and network sizes as saved."
            )

    def restore(self, step: int, abstract_state: TrainState, config: TrainConfig) -> TrainState:
        """The training state saved at `step`, after `check_compatible`.

        Arrays are laid out as the shardings of `abstract_state` say (see
        `shac.run.parallel.abstract_state`), or on this process's first device where
        it has none, whatever devices the checkpoint was written from.

        Raises:
            CheckpointError: no such checkpoint, or it cannot be read.
            IncompatibleCheckpointError: see `check_compatible`.
        """
        self.check_compatible(step, abstract_state, config)
        # without a sharding, orbax would lay arrays out as saved, on devices that may not exist here
        local = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        abstract_arrays = {
            name: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding or local)
            for name, x in state_arrays(abstract_state).items()
        }
        try:
            restored = self._manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract_arrays))
            )["state"]
        except Exception as e:
            raise CheckpointError(f"checkpoint '{self.path(step)}' is unreadable: {_first_line(e)}") from e
        self._verify(step, restored)
        return arrays_to_state(restored, abstract_state)

    def _verify(self, step: int, arrays: Arrays) -> None:
        """Raises CheckpointError unless `arrays` match the checksums saved with them (older checkpoints have none)."""
        try:
            saved = (self._manager.metadata(step).custom_metadata or {}).get("checksums")
        except Exception as e:
            raise CheckpointError(f"checkpoint '{self.path(step)}' is unreadable: {_first_line(e)}") from e
        if saved is None:
            return
        restored = checksums(arrays)
        changed = sorted(name for name in restored if saved.get(name) != restored[name])
        if changed:
            shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
            raise CheckpointError(
                f"checkpoint '{self.path(step)}' is unreadable: "
                f"its bytes changed on disk (checksum mismatch in {shown})"
            )

    def restore_latest(self, abstract_state: TrainState, config: TrainConfig) -> TrainState:
        """The newest readable checkpoint's state; falls back to older ones and logs why.

        A writer moves the unreadable checkpoints newer than the one restored to
        `<run_dir>/unreadable_checkpoints/` (logging each), so that the run can
        save those epochs again; a reader leaves them where they are.

        Raises:
            CheckpointError: there is no checkpoint, or none can be read.
            IncompatibleCheckpointError: the config does not fit (no fallback:
                older checkpoints of the run have the same shapes).
        """
        steps = self.steps()
        if not steps:
            raise CheckpointError(f"no complete checkpoint in '{self.directory}'")
        failures = []
        for step in reversed(steps):
            try:
                state = self.restore(step, abstract_state, config)
            except IncompatibleCheckpointError:
                raise
            except CheckpointError as e:
                failures.append(str(e))
                log.warning("%s; falling back to the previous checkpoint", e)
                continue
            if failures:
                log.warning("resuming from the older checkpoint '%s'", self.path(step))
                if self.writer:
                    self._set_aside([s for s in steps if s > step])
            return state
        raise CheckpointError(f"no readable checkpoint in '{self.directory}': " + "; ".join(failures))

    def _set_aside(self, steps: list[int]) -> None:
        """Moves the checkpoints of `steps` out of the way, to `<run_dir>/unreadable_checkpoints/<step>[.<n>]`."""
        if jax.process_index() == 0:
            for step in steps:
                target = self.directory.parent / UNREADABLE_DIR / str(step)
                n = 0
                while target.exists():
                    n += 1
                    target = target.with_name(f"{step}.{n}")
                target.parent.mkdir(exist_ok=True)
                shutil.move(self.path(step), target)
                log.warning(
                    "discarded the unreadable checkpoint '%s' (moved to '%s'); its epochs will be trained again",
                    self.path(step),
                    target,
                )
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("shac_checkpoint_set_aside")
        self._manager.reload()

    def _require(self, step: int) -> None:
        if step not in self.steps():
            available = ", ".join(map(str, self.steps())) or "none"
            raise CheckpointError(f"no checkpoint {step} in '{self.directory}'; available: {available}")

    def wait_until_finished(self) -> None:
        """Blocks until the pending asynchronous save is on disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _first_line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
