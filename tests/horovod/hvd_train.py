"""The elastic training program of the real-Horovod end-to-end test (run by `horovodrun`, not by
pytest).

A tiny PyTorch model trained with Horovod's elastic API, committing after every batch so a removed
host is let go at the next step. Every rank appends one JSON line per batch to $HVD_TRAIN_LOG (its
rank, the world size and the host name Horovod gave it), so the test can read the world Horovod
actually formed. It trains until the file $HVD_STOP exists; all ranks then return 0 together.
"""

from __future__ import annotations

import json
import os
import time

import horovod.torch as hvd
import torch

hvd.init()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = hvd.DistributedOptimizer(
    torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
)
LOG = os.environ["HVD_TRAIN_LOG"]
STOP = os.environ["HVD_STOP"]
HOST = os.environ.get("HOROVOD_HOSTNAME", "?")


def record(event: str, **fields: object) -> None:
    line = json.dumps(
        {"t": time.time(), "event": event, "host": HOST, "pid": os.getpid(), **fields}
    )
    with open(
        LOG, "a", encoding="utf-8"
    ) as out:  # one short O_APPEND write per line: ranks never interleave
        out.write(line + "\n")


@hvd.elastic.run
def train(state: hvd.elastic.TorchState) -> None:
    while True:
        # Every rank must agree to stop in the same batch, or the others would wait in the
        # allreduce.
        stop = hvd.allreduce(torch.tensor(float(os.path.exists(STOP))), op=hvd.Max).item() > 0
        if stop:
            return
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
        state.batch += 1
        record("batch", rank=hvd.rank(), size=hvd.size(), batch=state.batch)
        state.commit()
        time.sleep(0.2)


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, batch=0)
state.register_reset_callbacks([lambda: record("reset", rank=hvd.rank(), size=hvd.size())])
train(state)
record("done", rank=hvd.rank(), size=hvd.size())
