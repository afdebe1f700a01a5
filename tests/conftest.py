"""Shared test configuration. The zkcoord plugin itself is loaded through its pytest11 entry point."""

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Property tests check behaviour, not speed (speed is measured in benchmarks/): no per-example deadline and no
# too-slow health check, which both fail on a loaded 2-core CI machine without saying anything about the code.
settings.register_profile("zkcoord", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("zkcoord")
