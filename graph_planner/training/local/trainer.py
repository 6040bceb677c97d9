"""The local GRPO backend: one process, an HF causal LM (the toy model on CPU, a real checkpoint on one GPU).

One step: take ``train_batch_size`` tasks in a seeded order (a resumed run sees the same tasks), roll out
``group_size`` trajectories per task through ``rollout_fn`` (in ROLL-style waves of ``training.env_groups`` groups),
turn rewards into GRPO advantages (:mod:`graph_planner.training.grpo`, on verl ``core_algos``), then update the
policy on every turn's response tokens with the clipped loss, mini-batch by mini-batch (``ppo_mini_batch_size``
tasks each, ``grad_accum_steps`` micro-batches each), AdamW with linear warm-up and grad-norm clipping.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graph_planner.config.paths import run_paths
from graph_planner.config.schema import RunConfig
from graph_planner.episode.turns import Trajectory
from graph_planner.models.toy import resolve_model_path
from graph_planner.telemetry.metrics import reward_metrics, with_seed_names
from graph_planner.training import grpo
from graph_planner.training.background_imports import GRPO_IMPORTS, import_in_background
from graph_planner.training.local import checkpoint as ckpt
from graph_planner.training.local.policy_handle import PolicyHandle, sampling_temperature

log = logging.getLogger(__name__)

#: ``rollout_fn(policy, tasks, group_size)`` -> ``group_size`` trajectories per task, task by task, in order.
RolloutFn = Callable[["PolicyHandle", list[Any], int], list[Trajectory]]
LogFn = Callable[[dict[str, float], int], None]


class TaskSampler:
    """Seeded task order: epoch e is permutation(seed, e) of the tasks; step k takes positions [kB, (k+1)B)."""

    def __init__(self, num_tasks: int, batch_size: int, seed: int) -> None:
        if num_tasks < 1:
            raise ValueError("no training tasks: the task list is empty")
        self.num_tasks, self.batch_size, self.seed = num_tasks, batch_size, seed

    def indices_for_step(self, step: int) -> list[int]:
        out = []
        for pos in range(step * self.batch_size, (step + 1) * self.batch_size):
            epoch, offset = divmod(pos, self.num_tasks)
            out.append(int(np.random.default_rng([self.seed, epoch]).permutation(self.num_tasks)[offset]))
        return out

    def state(self) -> dict[str, int]:
        return {"num_tasks": self.num_tasks, "batch_size": self.batch_size, "seed": self.seed}


@dataclass
class Row:
    """One turn's response to learn from: its tokens, rollout log-probs and its trajectory's advantage."""

    prompt_ids: list[int]
    response_ids: list[int]
    old_logprobs: list[float] | None
    advantage: float
    group: int


def rollout_waves(num_tasks: int, env_groups: int, max_traj_per_env: int | None) -> list[range]:
    """ROLL sizing: ``env_groups`` x ``group_size`` envs run at once, each producing one trajectory per wave.

    A step therefore needs ceil(tasks / env_groups) trajectories per env; more than ``max_traj_per_env`` is a
    config error (None = derived, as ROLL derives it).
    """
    waves = math.ceil(num_tasks / env_groups)
    if max_traj_per_env is not None and waves > max_traj_per_env:
        raise ValueError(
            f"training.train_batch_size ({num_tasks}) with training.env_groups ({env_groups}) needs {waves} trajectories "
            f"per env per step, above training.max_traj_per_env ({max_traj_per_env}): raise training.max_traj_per_env to "
            f"{waves}, raise training.env_groups to {math.ceil(num_tasks / max_traj_per_env)}, or set it to null")
    return [range(w * env_groups, min(num_tasks, (w + 1) * env_groups)) for w in range(waves)]


def _state_key(traj: Trajectory) -> Hashable:
    """The state a trajectory started from (reward_norm_grouping='state'): its first prompt's tokens."""
    first = traj.turns[0].prompt_token_ids if traj.turns else None
    if not first:
        return ("task", traj.task_id)
    return hashlib.sha1(np.asarray(first, dtype=np.int64).tobytes()).hexdigest()


@contextlib.contextmanager
def _torch_threads(threads: int | None):
    """torch's CPU thread count set to ``threads`` (None: unchanged) for the block, then restored."""
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LocalGRPOTrainer:
    """GRPO in one process; ``train()`` runs to ``training.total_steps``, checkpointing on the way."""

    def __init__(self, config: RunConfig, rollout_fn: RolloutFn, tasks: Sequence[Any],
                 log_fn: LogFn | None = None, run_dir: str | Path | None = None) -> None:
        from graph_planner.imports import import_lock
        from graph_planner.models.loading import load_causal_lm

        with import_lock():  # rollout threads may be importing transformers at the same moment
            from transformers import AutoTokenizer

        import_in_background(*GRPO_IMPORTS)  # needed after the first rollout, which mostly waits on test runs
        self.config, self.t = config, config.training
        self.rollout_fn, self.tasks, self.log_fn = rollout_fn, list(tasks), log_fn
        self.run_dir = Path(run_dir or run_paths(config).run_dir)
        self.sampler = TaskSampler(len(self.tasks), self.t.train_batch_size, config.experiment.seed)
        self.waves = rollout_waves(self.t.train_batch_size, config.training.env_groups, config.training.max_traj_per_env)
        epoch_steps = math.ceil(self.t.total_epochs * len(self.tasks) / self.t.train_batch_size)
        self.max_steps = min(self.t.total_steps, epoch_steps)
        if epoch_steps < self.t.total_steps:
            log.warning("training.total_steps=%d capped to %d by training.total_epochs=%d (%d tasks, %d per step): "
                        "raise training.total_epochs to run every step", self.t.total_steps, epoch_steps,
                        self.t.total_epochs, len(self.tasks), self.t.train_batch_size)
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.t.torch_threads is not None:
            torch.set_num_threads(self.t.torch_threads)  # tiny CPU models lose more to thread hand-offs than they gain
        if self.t.precision == "fp16" and self.device.type != "cuda":
            raise ValueError("training.precision=fp16 needs a GPU (loss scaling); use bf16 or fp32 on CPU")
        self.amp_dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[self.t.precision]

        base_path = resolve_model_path(config.paths.planner_model, config.paths.cache_dir)
        resume = ckpt.resolve_resume(self.t.resume_from, self.run_dir)
        load_from = str(resume / ckpt.MODEL_DIR) if resume else base_path
        self.tokenizer = AutoTokenizer.from_pretrained(
            str(resume / ckpt.MODEL_DIR) if resume else (config.paths.planner_tokenizer or base_path))
        # fp32 master weights; bf16/fp16 run under autocast (mixed precision), as verl's FSDP actor does
        self.model = load_causal_lm(load_from, dtype=torch.float32).to(self.device)
        if self.t.gradient_checkpointing:
            if getattr(self.model, "supports_gradient_checkpointing", False):
                self.model.gradient_checkpointing_enable()
            else:
                log.warning("training.gradient_checkpointing: %s does not support it; training without",
                            type(self.model).__name__)
        self.model.train()
        self.ref_model = None
        if self.t.kl_coef > 0:  # the reference is the starting policy, also after a resume
            self.ref_model = load_causal_lm(base_path, dtype=torch.float32).to(self.device)
            self.ref_model.eval().requires_grad_(False)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=self.t.lr, weight_decay=self.t.weight_decay)
        warmup = self.t.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda k: min(1.0, (k + 1) / warmup) if warmup > 0 else 1.0)
        self.scaler = torch.amp.GradScaler("cuda") if self.t.precision == "fp16" else None
        self.policy = PolicyHandle(self.model, self.tokenizer, self.t.max_prompt_length, self.t.max_response_length,
                                   autocast=self._autocast)
        self.temperature = sampling_temperature(config.planner_sampling)
        self.step = 0
        if resume:
            self._load_state(resume)
        else:
            random.seed(config.experiment.seed)
            np.random.seed(config.experiment.seed)
            torch.manual_seed(config.experiment.seed)

    # ---- state -------------------------------------------------------------------------------------------
    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def _load_state(self, path: Path) -> None:
        state = ckpt.load_trainer_state(path)
        if state["data_order"] != self.sampler.state():
            raise ValueError(f"cannot resume from {path}: its data order {state['data_order']} differs from this "
                             f"run's {self.sampler.state()} (same tasks, training.train_batch_size and "
                             "experiment.seed are needed to see the same data)")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        ckpt.restore_rng(state["rng"])
        self.step = int(state["step"])
        log.info("resumed from %s at step %d", path, self.step)

    def save_checkpoint(self) -> Path:
        state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                 "scaler": self.scaler.state_dict() if self.scaler else None, "rng": ckpt.capture_rng(),
                 "data_order": self.sampler.state()}
        return ckpt.save_checkpoint(self.run_dir, self.step, self.model, self.tokenizer, state)

    # ---- loop --------------------------------------------------------------------------------------------
    def train(self, max_steps: int | None = None) -> list[dict[str, float]]:
        """Run until ``total_steps`` (or ``max_steps`` more steps); checkpoint every ``logging.save_interval``."""
        history = []
        stop = self.max_steps if max_steps is None else min(self.max_steps, self.step + max_steps)
        while self.step < stop:
            metrics = self.train_step()
            history.append(metrics)
            if self.step % self.config.logging.save_interval == 0 or self.step == self.max_steps:
                self.save_checkpoint()
        return history

    def step_tasks(self, step: int) -> list[Any]:
        return [self.tasks[i] for i in self.sampler.indices_for_step(step)]

    def rollout(self, tasks: list[Any]) -> list[Trajectory]:
        """Roll out every task of the step, wave by wave; check the rollout kept the group layout."""
        g = self.t.group_size
        trajectories: list[Trajectory] = []
        for wave in self.waves:
            wave_tasks = [tasks[i] for i in wave]
            got = self.rollout_fn(self.policy, wave_tasks, g)
            if len(got) != len(wave_tasks) * g:
                raise ValueError(f"rollout_fn returned {len(got)} trajectories for {len(wave_tasks)} tasks x "
                                 f"group_size {g}; it must return group_size per task, task by task")
            for j, traj in enumerate(got):
                expected = getattr(wave_tasks[j // g], "task_id", None)
                if expected is not None and traj.task_id != expected:
                    raise ValueError(f"rollout_fn trajectory {j} is for task {traj.task_id!r}, expected {expected!r}"
                                     " (group_size trajectories per task, in task order)")
            trajectories.extend(got)
        return trajectories

    def train_step(self) -> dict[str, float]:
        t0 = time.perf_counter()
        tasks = self.step_tasks(self.step)
        trajectories = self.rollout(tasks)
        t_rollout = time.perf_counter() - t0
        g = self.t.group_size
        group_ids = [i // g for i in range(len(trajectories))]
        rewards = torch.tensor([float(tr.reward) for tr in trajectories])
        advantages = grpo.group_advantages(rewards, group_ids, self.t, [_state_key(tr) for tr in trajectories])
        rows, skipped = [], 0
        for tr, adv, group in zip(trajectories, advantages.tolist(), group_ids):
            for turn in tr.turns:
                if not turn.prompt_token_ids or not turn.response_token_ids:
                    skipped += 1  # e.g. a turn from an HTTP policy: no token ids to learn from
                    continue
                rows.append(Row(list(turn.prompt_token_ids), list(turn.response_token_ids),
                                list(turn.response_logprobs) if turn.response_logprobs else None, adv, group))
        with _torch_threads(self.t.update_torch_threads):
            update = self._update(rows) if rows else {}
        elapsed = time.perf_counter() - t0
        tokens = sum(len(r.prompt_ids) + len(r.response_ids) for r in rows)
        turns = [turn for tr in trajectories for turn in tr.turns]
        metrics = {
            **reward_metrics(trajectories, group_ids),  # reward/*: the definitions verl's telemetry logs too
            "advantage/abs_mean": advantages.abs().mean().item(),
            "rollout/trajectories": float(len(trajectories)), "rollout/turns": float(len(turns)),
            "rollout/turns_without_tokens": float(skipped),
            "rollout/truncated_prompts": float(self.policy.truncated_prompts),
            "tokens": float(tokens), "response_tokens": float(sum(len(r.response_ids) for r in rows)),
            "step_time_s": elapsed, "rollout_time_s": t_rollout,
            "tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0, "lr": self.scheduler.get_last_lr()[0],
            **update,
        }
        metrics = with_seed_names(metrics)  # seed 000 section 5: train/kl, train/entropy, train/clipfrac, ...
        self.policy.truncated_prompts = 0
        self.step += 1
        if self.log_fn is not None:
            self.log_fn(metrics, self.step)
        return metrics

    # ---- update ------------------------------------------------------------------------------------------
    def _forward_response(self, model: Any, rows: list[Row]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded forward of prompt+response; returns response log-probs, response logits and the mask."""
        lengths = [len(r.prompt_ids) + len(r.response_ids) for r in rows]
        width, rmax = max(lengths), max(len(r.response_ids) for r in rows)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        positions = torch.zeros((len(rows), rmax), dtype=torch.long)
        labels = torch.zeros((len(rows), rmax), dtype=torch.long)
        mask = torch.zeros((len(rows), rmax))
        for i, r in enumerate(rows):
            seq = r.prompt_ids + r.response_ids
            input_ids[i, : len(seq)] = torch.tensor(seq)
            attention[i, : len(seq)] = 1
            n = len(r.response_ids)  # logits at position p predict token p + 1
            positions[i, :n] = torch.arange(len(r.prompt_ids) - 1, len(r.prompt_ids) - 1 + n)
            labels[i, :n] = torch.tensor(r.response_ids)
            mask[i, :n] = 1
        with self._autocast():
            logits = model(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                           use_cache=False).logits
        index = positions.to(self.device).unsqueeze(-1).expand(-1, -1, logits.shape[-1])
        resp_logits = torch.gather(logits, 1, index).float() / self.temperature
        logprobs = torch.log_softmax(resp_logits, dim=-1).gather(-1, labels.to(self.device).unsqueeze(-1)).squeeze(-1)
        return logprobs, resp_logits, mask.to(self.device)

    def _update(self, rows: list[Row]) -> dict[str, float]:
        """One optimizer update per mini-batch of ``ppo_mini_batch_size`` task groups."""
        missing = [r for r in rows if r.old_logprobs is None or len(r.old_logprobs) != len(r.response_ids)]
        if missing:  # rollouts without log-probs: take them under the current (= sampling) policy
            with torch.no_grad():
                lp, _, _ = self._forward_response(self.model, missing)
            for r, values in zip(missing, lp.tolist()):
                r.old_logprobs = values[: len(r.response_ids)]
        per_group = self.t.ppo_mini_batch_size
        n_groups = max(r.group for r in rows) + 1
        sums: dict[str, float] = {}
        counts = 0
        starts = [start for _ in range(self.t.ppo_epochs) for start in range(0, n_groups, per_group)]
        for start in starts:  # ppo_epochs passes; old log-probs stay the rollout's, as in verl
            mini = [r for r in rows if start <= r.group < start + per_group]
            if not mini:
                continue
            info = grpo.batch_info([len(r.response_ids) for r in mini], self.t)
            micro_size = math.ceil(len(mini) / self.t.grad_accum_steps)
            acc: dict[str, float] = {}
            for m0 in range(0, len(mini), micro_size):
                micro = mini[m0: m0 + micro_size]
                for key, value in self._micro_step(micro, info).items():
                    acc[key] = acc.get(key, 0.0) + value * (len(micro) / len(mini) if key.startswith("actor/") else 1.0)
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.clip_grad_norm)
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            elif torch.isfinite(grad_norm):
                self.optimizer.step()
            else:
                log.warning("step %d: non-finite grad norm, update skipped", self.step)
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            acc["grad_norm"] = float(grad_norm)
            for key, value in acc.items():
                sums[key] = sums.get(key, 0.0) + value
            counts += 1
        return {key: value / counts for key, value in sums.items()}

    def _micro_step(self, rows: list[Row], info: dict[str, Any]) -> dict[str, float]:
        logprobs, logits, mask = self._forward_response(self.model, rows)
        old = torch.zeros_like(logprobs)
        for i, r in enumerate(rows):
            old[i, : len(r.response_ids)] = torch.tensor(r.old_logprobs, device=old.device)
        adv = torch.tensor([r.advantage for r in rows], device=logprobs.device)
        pg_loss, pg_metrics = grpo.policy_loss(old, logprobs, adv, mask, self.t, info)
        with torch.set_grad_enabled(self.t.entropy_coef > 0):
            entropy = grpo.entropy_term(logits, mask, self.t, info)
        kl = None
        if self.ref_model is not None:
            with torch.no_grad():
                ref_logprobs, _, _ = self._forward_response(self.ref_model, rows)
            kl = grpo.kl_term(logprobs, ref_logprobs, mask, self.t, info)
        loss = grpo.total_loss(pg_loss, self.t, entropy=entropy, kl=kl)
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        out = {"loss": loss.item(), "pg_loss": pg_loss.item(), "entropy": entropy.item(),
               **{k: float(v) for k, v in pg_metrics.items()}}
        if kl is not None:
            out["kl"] = kl.item()
        return out
