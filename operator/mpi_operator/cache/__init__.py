"""client-go in miniature, for asyncio: reflector, store/indexer, informer, work queue, rate
limiters.

Generic: nothing here knows about MPIJobs (no imports of api/desired/controller). The only kube
module it imports is `kube.errors`, to recognise 410 Gone.
"""
