pytest_plugins = ["kubesim.testing"]
