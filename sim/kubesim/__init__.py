"""kubesim: an embedded Kubernetes API server with kubelet, Job-controller and GC simulation."""
