"""``training.distribute``: tf.distribute strategies from the recipe.

- ``none``: TensorFlow's default (one device).
- ``mirrored``: ``tf.distribute.MirroredStrategy`` over all local GPUs, or,
  on a machine without GPUs, over ``cpu_devices`` logical CPU devices.
- ``multi_worker``: ``tf.distribute.MultiWorkerMirroredStrategy`` reading the
  cluster from the ``TF_CONFIG`` environment variable, as TensorFlow documents.

The recipe's ``training.batch_size`` is the *global* batch; each of the
``num_replicas_in_sync`` replicas gets ``batch_size / replicas`` examples per step.

TensorFlow, Keras and the seqkit modules that import them are imported inside the functions that use
them, so importing this module does not load TensorFlow.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from seqkit.errors import SeqkitError


@dataclass
class Distribution:
    """The strategy and this process's place in it.

    Attributes:
        strategy: the ``tf.distribute.Strategy``.
        replicas: ``num_replicas_in_sync`` (all workers together).
        is_chief: this process writes the run directory.
        worker: ``"chief"`` / ``"worker 1"`` ... for messages.
    """

    strategy: object
    replicas: int
    is_chief: bool
    worker: str


def parse_tf_config(text: str | None) -> dict | None:
    """Validate ``TF_CONFIG`` for multi-worker training.

    Returns:
        The parsed dict, or ``None`` when ``text`` is empty.

    Raises:
        SeqkitError: malformed JSON, a missing cluster/task, a task that is not
            in the cluster, or an address without a port.
    """
    if not text:
        return None
    fix = ('Set it as TensorFlow documents, e.g. TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", '
           '"host2:12345"]}, "task": {"type": "worker", "index": 0}}\'.')
    try:
        cfg = json.loads(text)
    except ValueError as exc:
        raise SeqkitError(f"TF_CONFIG is not valid JSON ({exc}). {fix}") from exc
    cluster, task = cfg.get("cluster") if isinstance(cfg, dict) else None, cfg.get("task") if isinstance(cfg, dict) else None
    if not isinstance(cluster, dict) or not cluster or not isinstance(task, dict):
        raise SeqkitError(f"TF_CONFIG needs a 'cluster' mapping and a 'task' mapping. {fix}")
    for kind, addrs in cluster.items():
        if kind not in ("chief", "worker", "evaluator", "ps") or not isinstance(addrs, list) or not addrs:
            raise SeqkitError(f"TF_CONFIG cluster '{kind}': expected a non-empty list of host:port "
                              f"under 'chief' or 'worker'. {fix}")
        for a in addrs:
            host, _, port = str(a).rpartition(":")
            if not host or not port.isdigit():
                raise SeqkitError(f"TF_CONFIG cluster '{kind}': address '{a}' is not host:port. {fix}")
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster or not isinstance(index, int) or not 0 <= index < len(cluster[kind]):
        raise SeqkitError(f"TF_CONFIG task {task}: not a member of the cluster "
                          f"({', '.join(f'{k}: {len(v)}' for k, v in cluster.items())}). {fix}")
    return cfg


def _split_cpu(n: int) -> None:
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as exc:
        if len(tf.config.list_logical_devices("CPU")) == n:
            return
        raise SeqkitError(f"training.distribute.cpu_devices: {n} logical CPU devices must be set "
                          f"before TensorFlow starts; run the recipe in a fresh process "
                          f"(`seqkit train`).") from exc


def make_distribution(cfg) -> Distribution:
    """Create the strategy a recipe's ``training.distribute`` asks for.

    Raises:
        SeqkitError: a bad ``TF_CONFIG``, or ``multi_worker`` without one.
    """
    import tensorflow as tf

    if cfg.strategy == "none":
        return Distribution(tf.distribute.get_strategy(), 1, True, "chief")
    comm = tf.distribute.experimental.CommunicationOptions(timeout_seconds=cfg.timeout_seconds)
    if cfg.strategy == "mirrored":
        if cfg.cpu_devices and not tf.config.list_physical_devices("GPU"):
            _split_cpu(cfg.cpu_devices)
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
            strategy = tf.distribute.MirroredStrategy(
                devices=devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
        else:
            strategy = tf.distribute.MirroredStrategy()
        return Distribution(strategy, strategy.num_replicas_in_sync, True, "chief")
    tf_config = parse_tf_config(os.environ.get("TF_CONFIG"))
    if tf_config is None:
        raise SeqkitError("training.distribute.strategy: multi_worker needs the TF_CONFIG environment "
                          "variable naming the cluster and this worker's task; see the documentation, "
                          "'Several devices and hosts' (docs/distributed.md).")
    if cfg.cpu_devices:
        _split_cpu(cfg.cpu_devices)
    _patch_keras_scalar_reduce()
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=comm)
    task = tf_config["task"]
    has_chief = "chief" in tf_config["cluster"]
    is_chief = task["type"] == "chief" or (not has_chief and task["type"] == "worker" and task["index"] == 0)
    return Distribution(strategy, strategy.num_replicas_in_sync, is_chief, f"{task['type']} {task['index']}")


def _patch_keras_scalar_reduce() -> None:
    """Let Keras 3.15 ``fit`` run under ``MultiWorkerMirroredStrategy``.

    Its step function reduces every per-replica log with
    ``strategy.reduce("MEAN", v, axis=0)`` when the strategy spans workers,
    which fails for scalar logs ("Invalid reduction dimension 0 for input with
    0 dimensions"; keras-team/keras#20585). Scalars are reduced with
    ``axis=None`` (the mean over replicas) instead; everything else is as Keras
    does it. Installed once, and only when ``multi_worker`` is asked for.
    """
    import keras.src.backend.tensorflow.trainer as kt
    from keras.src import tree

    if getattr(kt.reduce_per_replica, "_seqkit_patched", False):
        return
    original = kt.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and kt._collective_all_reduce_multi_worker(strategy):
            def one(v):
                local = strategy.experimental_local_results(v)[0] if kt._is_per_replica_instance(v) else v
                return strategy.reduce("MEAN", v, axis=None if local.shape.rank == 0 else 0)

            return tree.map_structure(one, values)
        return original(values, strategy, reduction)

    reduce_per_replica._seqkit_patched = True
    kt.reduce_per_replica = reduce_per_replica
