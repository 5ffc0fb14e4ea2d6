"""Elastic Horovod training of a small Keras CNN on MNIST (TensorFlow 2).

Run by the launcher through `horovodrun --min-np/--max-np --host-discovery-script ...`; the world
grows and shrinks while it trains. What makes it elastic:

- `hvd.elastic.TensorFlowKerasState` holds the model, the optimizer and the loop counters; rank 0's
  copy is broadcast to every worker whenever the world changes (`state.sync()`), so new workers
  start from it;
- `@hvd.elastic.run` re-runs `train` after a reset: on a failure (HorovodInternalError) from the
  last commit, on a host change (HostsUpdatedInterrupt) from where the ranks are;
- `state.commit()` every `--batches-per-commit` batches saves a copy to roll back to and is where a
  host change is noticed; a removed worker keeps training until then, so keep it frequent;
- `on_state_reset` scales the learning rate with the new `hvd.size()`.
"""

from __future__ import annotations

import argparse
import os

import horovod.tensorflow as hvd
import tensorflow as tf


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=24)
    parser.add_argument("--batches-per-epoch", type=int, default=500)
    parser.add_argument("--batches-per-commit", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--lr", type=float, default=0.001, help="learning rate of one worker process"
    )
    return parser.parse_args()


def build_model() -> tf.keras.Model:
    return tf.keras.Sequential(
        [
            tf.keras.layers.Conv2D(32, [3, 3], activation="relu", input_shape=(28, 28, 1)),
            tf.keras.layers.Conv2D(64, [3, 3], activation="relu"),
            tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
            tf.keras.layers.Dropout(0.25),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dropout(0.5),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )


def main() -> None:
    args = parse_args()
    hvd.init()

    # One GPU per process (a worker with N GPUs runs N slots); CPU-only workers skip this.
    gpus = tf.config.experimental.list_physical_devices("GPU")
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")

    # A per-rank file name: ranks sharing a node must not race on one download.
    (images, labels), _ = tf.keras.datasets.mnist.load_data(path=f"mnist-{hvd.rank()}.npz")
    dataset = (
        tf.data.Dataset.from_tensor_slices(
            (tf.cast(images[..., tf.newaxis] / 255.0, tf.float32), tf.cast(labels, tf.int64))
        )
        .repeat()
        .shuffle(10000, seed=hvd.rank())
        .batch(args.batch_size)
    )
    batches = iter(dataset)

    model = build_model()
    loss_fn = tf.losses.SparseCategoricalCrossentropy()
    optimizer = tf.optimizers.Adam(args.lr * hvd.size())

    @tf.function
    def training_step(images: tf.Tensor, labels: tf.Tensor, allreduce: bool = True) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        if allreduce:
            tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        # The image's Python (3.8) predates zip(strict=...).
        optimizer.apply_gradients(zip(grads, model.trainable_variables))  # noqa: B905
        return loss

    # One local step creates the optimizer's variables, so the state has something to broadcast.
    first_images, first_labels = next(batches)
    training_step(first_images, first_labels, allreduce=False)

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    def on_state_reset() -> None:
        tf.keras.backend.set_value(state.optimizer.learning_rate, args.lr * hvd.size())

    state.register_reset_callbacks([on_state_reset])

    @hvd.elastic.run
    def train(state: hvd.elastic.TensorFlowKerasState) -> None:
        # Resumes where the last commit (or, after a host change, the ranks) left off.
        while state.epoch < args.epochs:
            while state.batch < args.batches_per_epoch:
                images, labels = next(batches)
                loss = training_step(images, labels)
                if hvd.rank() == 0 and state.batch % 50 == 0:
                    print(
                        f"epoch {state.epoch} batch {state.batch} loss {float(loss):.4f} size "
                        f"{hvd.size()} "
                        f"host {os.environ.get('HOROVOD_HOSTNAME', '?')}",
                        flush=True,
                    )
                state.batch += 1
                if state.batch % args.batches_per_commit == 0:
                    state.commit()
            state.batch = 0
            state.epoch += 1
            state.commit()

    train(state)
    if hvd.rank() == 0:
        print("training finished", flush=True)


if __name__ == "__main__":
    main()
