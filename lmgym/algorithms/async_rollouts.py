"""Asynchronous rollout workers (`rollout_workers: R`): R ranks of the torchrun launch sample, the others train.

A rollout rank runs the episode engine (`RLAlgorithm.sample_groups`, the policy's fast decoder) on its consecutive
share of each batch's groups, with the same env-reset seeds (the trainers' shared draw, sent as the run starts)
and the same keyed sampling noise (seed, batch, group id, member) as a colocated run, so a problem's samples do not
depend on which rank draws them. It tags each trajectory with the policy version that sampled it
(`Trajectory.iteration`) and sends each trainer rank that trainer's groups. Trainer rank 0 publishes the weights
after each iteration's update (the trainable ones: a LoRA adapter alone when training LoRA); rollout ranks take
them between batches, sampling batch b with version b - `max_policy_lag` (training/rollout_workers/roles.py), so
they sample the next batch while the trainers train on this one.

The trainers treat a lagging trajectory as they treat a replayed one (algorithms/replay.py): its `iteration` is
older than the trainer's, its behaviour log-probs make the importance ratio, the clipped losses (GRPO, PPO) use
it and REINFORCE-stable weighs its tokens by `truncated_importance_weights`. A trajectory more than
`max_policy_lag` versions old is dropped before any use and counted (`dropped_stale_trajectories`)."""
from __future__ import annotations

import time

from lmgym.buffers import Trajectory
from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.config import ConfigError
from lmgym.training.rollout_workers.roles import Roles, drain_batches, group_slice, needed_version, publishes
from lmgym.training.rollout_workers.transport import Batch, TrajectoryReceiver, TrajectorySender
from lmgym.training.rollout_workers.weights import END, FULL, WEIGHTS, WeightPublisher, receive_weights


def within_lag(trajectories: list[Trajectory], version: int, max_lag: int) -> tuple[list[Trajectory], int]:
    """The trajectories sampled at most `max_lag` policy versions before `version`, and how many were older."""
    kept = [t for t in trajectories if version - t.iteration <= max_lag]
    return kept, len(trajectories) - len(kept)


def check_async(algorithm, roles: Roles) -> None:
    """One-line ConfigErrors for what rollout workers cannot run with."""
    c, name = algorithm.config, type(algorithm).__name__
    if type(algorithm).collect.__qualname__ != "RLAlgorithm.collect":
        raise ConfigError(f"{name}.rollout_workers: {name} collects its own way (it overrides collect()); rollout "
                          f"workers run RLAlgorithm's episode sampling: set rollout_workers 0", "rollout_workers")
    if c.data_parallel == "fsdp":
        raise ConfigError(f"{name}.rollout_workers needs data_parallel ddp or allreduce for now (FSDP's shards would "
                          f"have to be gathered for every broadcast); got fsdp", "rollout_workers")
    if c.replay_iterations:
        raise ConfigError(f"{name}.replay_iterations needs rollout_workers 0: with rollout workers a trajectory's "
                          f"iteration is the policy version that sampled it; got {c.replay_iterations}",
                          "replay_iterations")
    for ranks, what in ((roles.rollout_workers, "rollout_workers"), (roles.trainers, "trainer ranks")):
        if c.prompts_per_iteration % ranks:
            raise ConfigError(f"{name}.prompts_per_iteration must be divisible by the {what} ({ranks}): each takes "
                              f"whole groups; got {c.prompts_per_iteration}", "prompts_per_iteration")


class AsyncRollouts(TrainerCallback):
    """Both sides of a run with rollout workers: `run_worker` on a rollout rank; on a trainer rank `collect`,
    `publish` (after the update), and the start and end of the run as callbacks."""

    def __init__(self, algorithm, roles: Roles):
        check_async(algorithm, roles)
        self.roles, self.lag = roles, algorithm.config.max_policy_lag
        self.start = 0                 # the iteration the run started (or resumed) from
        self.started = False           # trainer rank 0 sent the start (at the first batch)
        self.sample_seconds = 0.0      # the slowest rollout rank's sampling time of the batch just received
        self.publisher = WeightPublisher(roles.weights_group) if roles.rank == 0 else None
        self.receiver = TrajectoryReceiver(roles.transport_group)

    # ------------------------------------------------------------------ trainer side
    def on_train_begin(self, trainer) -> None:
        self.start, self.started = trainer.iteration, False

    def begin(self, trainer) -> None:
        """Trainer rank 0 sends the run's start: every weight, the iteration, the shared generator's state. Sent at
        the first batch (after the evaluation at start, which the rollout ranks would otherwise sample through)."""
        if self.publisher is not None and not self.started:
            self.publisher.publish(FULL, trainer.iteration, list(trainer.policy.model.parameters()),
                                   {"rng": trainer.rng.bit_generator.state})
        self.started = True

    def collect(self, algorithm) -> list[Trajectory]:
        """This trainer's groups of the current batch, from every rollout rank, those that lag too far dropped."""
        self.begin(algorithm)
        c, k = algorithm.config, algorithm.iteration
        algorithm.rng.integers(0, 2**31 - 1, c.prompts_per_iteration)  # the draw the rollout ranks made for it
        batches = [self.receiver.receive(src, k) for src in self.roles.rollout_ranks]
        received = [t for batch in batches for t in batch.trajectories]
        self.sample_seconds = max(batch.seconds for batch in batches)
        kept, dropped = within_lag(received, k, self.lag)
        lags = dist.all_reduce_dict({"lag": float(sum(k - t.iteration for t in kept)), "kept": float(len(kept)),
                                     "dropped": float(dropped)})
        self.metrics = {"policy_lag": lags["lag"] / max(lags["kept"], 1.0), "dropped_stale_trajectories": int(
            lags["dropped"])}
        return kept

    def publish(self, algorithm) -> None:
        """After iteration k's update: trainer rank 0 sends version k + 1 when a batch of the run needs it."""
        c = algorithm.config
        if self.publisher is not None and publishes(algorithm.iteration, c.train_iterations, self.lag):
            self.publisher.publish(WEIGHTS, algorithm.iteration + 1, algorithm.trainable_parameters())

    def on_train_end(self, trainer, rows) -> None:
        """Take (and discard) the batches sampled past an early stop, then end the rollout ranks with the rows."""
        c = trainer.config
        self.begin(trainer)  # a run with no iteration left still starts the rollout ranks, to end them
        for index in drain_batches(trainer.iteration, self.start, c.train_iterations, self.lag):
            for src in self.roles.rollout_ranks:
                self.receiver.receive(src, index)
        if self.publisher is not None:
            self.publisher.wait()
            self.publisher.publish(END, trainer.iteration, payload=rows or [])

    # ------------------------------------------------------------------ rollout side
    def run_worker(self, algorithm) -> list[dict]:
        """A rollout rank's whole run: take the start, then sample and send each batch with the weights it needs;
        returns the run's metrics rows (trainer rank 0's, as `train()` returns on every rank)."""
        c, roles = algorithm.config, self.roles
        full, trainable = list(algorithm.policy.model.parameters()), algorithm.trainable_parameters()
        message = receive_weights(roles.weights_group, full, trainable)
        if message.kind != FULL:
            raise RuntimeError(f"rollout rank {roles.rank} expected the run's start, got message kind {message.kind}")
        algorithm.rng.bit_generator.state = message.payload["rng"]
        self.start = version = message.version
        sender = TrajectorySender(roles.transport_group)
        prompts = c.prompts_per_iteration
        first, stop = group_slice(prompts, roles.rollout_workers, roles.worker_index)
        algorithm.policy.model.eval()
        for batch in range(self.start, c.train_iterations):
            while version < needed_version(batch, self.start, self.lag):
                message = receive_weights(roles.weights_group, full, trainable)
                if message.kind == END:
                    sender.wait()
                    return message.payload
                if message.version != version + 1:
                    raise RuntimeError(f"rollout rank {roles.rank} holds version {version}, got {message.version}")
                version = message.version
            seeds = algorithm.rng.integers(0, 2**31 - 1, prompts)
            algorithm.iteration = batch  # the keyed sampling noise: (seed, batch, group id, member)
            started = time.perf_counter()
            sampled = algorithm.sample_groups(stop - first, batch * prompts + first, seeds[first:stop])
            seconds = time.perf_counter() - started
            for t in sampled:
                t.iteration = version
            for trainer in roles.trainer_ranks:
                low, high = group_slice(prompts, roles.trainers, trainer)
                share = [t for t in sampled if batch * prompts + low <= t.group_id < batch * prompts + high]
                sender.send(trainer, Batch(batch, share, seconds))
        message = receive_weights(roles.weights_group, full, trainable)  # no batch needs a later version: END
        if message.kind != END:
            raise RuntimeError(f"rollout rank {roles.rank} expected the run's end, got version {message.version}")
        sender.wait()
        return message.payload
