"""Elastic Horovod benchmark of a torchvision model on synthetic data (PyTorch).

Run by the launcher through `horovodrun --min-np/--max-np --host-discovery-script ...`. What makes
it elastic:

- `hvd.elastic.TorchState` holds the model, the optimizer and the counters; rank 0's copy is
  broadcast whenever the world changes, so workers that join start from it;
- `@hvd.elastic.run` re-runs `run_benchmark` after a reset (from the last commit after a failure);
- `state.commit()` every `--batches-per-commit` batches saves the state and is where Horovod notices
  a host change; a worker removed from discovery keeps training until the next commit;
- `on_state_reset` scales the learning rate with the new `hvd.size()`.
"""

from __future__ import annotations

import argparse
import timeit

import horovod.torch as hvd
import torch
import torch.nn.functional as F
from torch import nn, optim


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default="resnet18",
        help="a torchvision.models constructor, or 'tiny' (a small CNN, no torchvision) for smoke "
        "runs",
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument(
        "--lr", type=float, default=0.01, help="learning rate of one worker process"
    )
    parser.add_argument("--batches-per-iteration", type=int, default=10)
    parser.add_argument("--batches-per-commit", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument(
        "--no-cuda", action="store_true", help="train on CPU even where CUDA is available"
    )
    return parser.parse_args()


def build_model(name: str) -> nn.Module:
    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(8, 1000),
        )
    from torchvision import (
        models,
    )  # only real models need it (and its image's matching torch build)

    model: nn.Module = getattr(models, name)()
    return model


def main() -> None:
    args = parse_args()
    cuda = not args.no_cuda and torch.cuda.is_available()
    hvd.init()
    torch.manual_seed(42)
    if cuda:
        torch.cuda.set_device(hvd.local_rank())  # one GPU per process: slots = GPUs per worker

    model = build_model(args.model)
    if cuda:
        model.cuda()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    data = torch.randn(args.batch_size, 3, args.image_size, args.image_size)
    target = torch.randint(0, 1000, (args.batch_size,))
    if cuda:
        data, target = data.cuda(), target.cuda()

    def benchmark_step(state: hvd.elastic.TorchState) -> None:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data), target)
        loss.backward()
        optimizer.step()
        state.batch += 1
        if state.batch % args.batches_per_commit == 0:
            state.commit()

    def on_state_reset() -> None:
        for group in optimizer.param_groups:
            group["lr"] = args.lr * hvd.size()

    state = hvd.elastic.TorchState(model, optimizer, batch=0, iteration=0)
    state.register_reset_callbacks([on_state_reset])

    @hvd.elastic.run
    def run_benchmark(state: hvd.elastic.TorchState) -> None:
        while state.iteration < args.iterations:
            seconds = timeit.timeit(
                lambda: benchmark_step(state), number=args.batches_per_iteration
            )
            if hvd.rank() == 0:
                rate = args.batch_size * args.batches_per_iteration / seconds
                print(
                    f"iteration {state.iteration}: {rate:.1f} img/sec per process, "
                    f"{rate * hvd.size():.1f} img/sec on {hvd.size()} processes",
                    flush=True,
                )
            state.iteration += 1
            state.commit()

    run_benchmark(state)
    if hvd.rank() == 0:
        print("benchmark finished", flush=True)


if __name__ == "__main__":
    main()
