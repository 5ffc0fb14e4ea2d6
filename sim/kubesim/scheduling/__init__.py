"""kube-scheduler's default profile as pure functions of data: what a pod requests (`resources`),
which nodes it may go to (`filters`), which of them is best (`score`) and the words of a failure
(`messages`). `kubesim.controllers.scheduler` applies them to the cluster.
"""
