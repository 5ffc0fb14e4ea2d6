from hypothesis import settings

pytest_plugins = ["kubesim.testing"]

# Hypothesis fails an example that takes longer than 200 ms by default: a wall-clock bound that a
# loaded 2-core machine breaks (it did, in test_sim_patch). Examples are bounded by their count instead.
settings.register_profile("no-deadline", deadline=None)
settings.load_profile("no-deadline")
