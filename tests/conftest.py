"""Test session setup: JAX's persistent compilation cache, shared with the CLI subprocesses."""

from launch.runtime import configure_runtime

configure_runtime()
