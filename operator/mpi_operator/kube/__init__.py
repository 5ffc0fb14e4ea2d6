"""The I/O edge: the only package that talks to the API server (and imports kubernetes_asyncio).

Modules: `resources` (the REST resources to address), `errors` (typed failures), `retry` (one call,
transient failures only), `client` (`Kube`, dicts in and out, and one resource of it as the
reflector's ListerWatcher), `events` (best-effort EventRecorder). Import the modules themselves;
this package namespace stays empty so `cache` can import `errors` without loading the HTTP stack.
"""
