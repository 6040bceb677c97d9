"""LocalGRPOTrainer on the toy model (CPU): updates, metrics, checkpoints, resume, accumulation, KL, ROLL waves.

The rollout here is scripted (no env): fixed prompt token sequences, responses sampled from the policy being
trained, reward 1 when the response contains a token of a target set. The env rollout is wired separately.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from graph_planner.config.loader import load_run_config
from graph_planner.episode.turns import Trajectory, Turn
from graph_planner.training.local import checkpoint as ckpt
from graph_planner.training.local.trainer import LocalGRPOTrainer, Row, TaskSampler


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """A 64-wide model is dominated by thread hand-offs; one thread is faster and deterministic."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cache_dir(shared_model_cache):
    """The session's toy cache (built once for the suite; no test here writes into it)."""
    return str(shared_model_cache)


class PromptTask:
    def __init__(self, i: int) -> None:
        self.task_id = f"prompt-{i}"
        self.ids = [3, 10 + i, 20 + i, 5]


TASKS = [PromptTask(i) for i in range(5)]


def make_config(tmp_path, cache_dir, **overrides):
    base = {
        "logging.output_dir": str(tmp_path / "runs"), "experiment.run_name": "t", "experiment.seed": 7,
        "paths.cache_dir": cache_dir, "training.total_steps": 4, "training.total_epochs": 10,
        "training.train_batch_size": 2, "training.ppo_mini_batch_size": 2, "training.group_size": 4,
        "training.lr": 1e-3, "planner_sampling.temperature": 1.0, "planner_sampling.top_p": 1.0,
        "planner_sampling.max_new_tokens": 6, "logging.save_interval": 2, "env.env_groups": 2,
    }
    return load_run_config(None, {**base, **overrides})


class TargetTokenRollout:
    """Samples group_size responses per prompt; reward 1 if any response token is in the target set."""

    def __init__(self, config):
        self.sampling = config.planner_sampling
        self.seen: list[list[str]] = []

    def __call__(self, policy, tasks, group_size):
        self.seen.append([t.task_id for t in tasks])
        target = set(range(100, 100 + len(policy.tokenizer) // 20))
        out = []
        for task, gens in zip(tasks, policy.generate_batch([t.ids for t in tasks], self.sampling, group_size)):
            for gen in gens:
                turn = Turn(prompt_messages=[], response_text=gen.text, action=None, observation="",
                            prompt_token_ids=gen.prompt_ids, response_token_ids=gen.response_ids,
                            response_logprobs=gen.logprobs)
                out.append(Trajectory(task_id=task.task_id, turns=[turn],
                                      reward=1.0 if target & set(gen.response_ids) else 0.0))
        return out


def fixed_rollout(policy, tasks, group_size):
    """Deterministic: the same responses every time, rewards by position, no rollout log-probs."""
    out = []
    for t, task in enumerate(tasks):
        for k in range(group_size):
            turn = Turn(prompt_messages=[], response_text="", action=None, observation="",
                        prompt_token_ids=task.ids, response_token_ids=[30 + k, 40 + t, 50 + k][: 1 + k % 3])
            out.append(Trajectory(task_id=task.task_id, turns=[turn], reward=float(k % 2)))
    return out


def weights(model):
    """A CPU copy of the model's weights (comparable with a checkpoint reloaded on CPU, also on a GPU machine)."""
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def test_step_updates_policy_and_reports_metrics(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir)
    logged = []
    trainer = LocalGRPOTrainer(config, TargetTokenRollout(config), TASKS, log_fn=lambda m, s: logged.append((s, m)))
    before = weights(trainer.model)
    metrics = trainer.train_step()
    assert trainer.step == 1 and logged[0][0] == 1
    for key in ("reward/mean", "reward/std", "loss", "grad_norm", "entropy", "tokens", "step_time_s",
                "tokens_per_s", "actor/pg_clipfrac"):
        assert key in metrics, key
    assert metrics["rollout/trajectories"] == 8 and metrics["tokens"] > 0
    changed = [k for k, v in weights(trainer.model).items() if not torch.equal(v, before[k])]
    assert changed, "an optimizer step with non-zero advantages must change the weights"


def test_rollout_logprobs_equal_the_trainers_recompute(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir)
    trainer = LocalGRPOTrainer(config, TargetTokenRollout(config), TASKS)
    gens = trainer.policy.generate_batch([TASKS[0].ids, TASKS[1].ids + [7, 8]], config.planner_sampling, 3)
    rows = [Row(g.prompt_ids, g.response_ids, g.logprobs, 0.0, 0) for group in gens for g in group]
    with torch.no_grad():
        recomputed, _, mask = trainer._forward_response(trainer.model, rows)
    for i, row in enumerate(rows):
        n = len(row.response_ids)
        assert mask[i].sum().item() == n
        assert recomputed[i, :n].tolist() == pytest.approx(row.old_logprobs, abs=1e-4)  # PPO ratio starts at 1


def test_policy_handle_chat_messages_and_long_prompts(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.max_prompt_length": 16})
    trainer = LocalGRPOTrainer(config, TargetTokenRollout(config), TASKS)
    messages = [{"role": "user", "content": "x " * 40}]
    full = trainer.policy.encode(messages)
    assert len(full) > 16 and full[-2] == trainer.tokenizer.convert_tokens_to_ids("<|assistant|>")
    gen = trainer.policy.generate(messages, config.planner_sampling)
    assert gen.prompt_ids == full[-16:]  # cut to the last 16 tokens: the generation prompt survives
    assert trainer.policy.truncated_prompts == 1
    assert 1 <= len(gen.response_ids) <= 6 and len(gen.logprobs) == len(gen.response_ids)
    assert isinstance(gen.text, str)


def test_resume_continues_at_step_with_same_data_and_identical_weights(tmp_path, cache_dir):
    full_cfg = make_config(tmp_path / "full", cache_dir)
    full_rollout = TargetTokenRollout(full_cfg)
    full = LocalGRPOTrainer(full_cfg, full_rollout, TASKS)
    full.train()
    assert full.step == 4

    part_cfg = make_config(tmp_path / "part", cache_dir)
    first = TargetTokenRollout(part_cfg)
    LocalGRPOTrainer(part_cfg, first, TASKS).train(max_steps=2)  # "killed" after step 2
    root = ckpt.checkpoint_root(tmp_path / "part" / "runs" / "t")
    assert (root / ckpt.LATEST).read_text() == "step_2"
    resumed_cfg = make_config(tmp_path / "part", cache_dir, **{"training.resume_from": "auto"})
    second = TargetTokenRollout(resumed_cfg)
    resumed = LocalGRPOTrainer(resumed_cfg, second, TASKS)
    assert resumed.step == 2
    resumed.train()
    assert resumed.step == 4
    assert first.seen + second.seen == full_rollout.seen  # same task order as the uninterrupted run
    final, expected = weights(resumed.model), weights(full.model)
    assert all(torch.equal(final[k], expected[k]) for k in expected)
    assert sorted(p.name for p in root.iterdir()) == ["latest", "step_2", "step_4"]
    reloaded = AutoModelForCausalLM.from_pretrained(root / "step_4" / ckpt.MODEL_DIR)
    assert all(torch.equal(reloaded.state_dict()[k], expected[k]) for k in expected)


def test_resume_refuses_a_different_data_order(tmp_path, cache_dir):
    auto = make_config(tmp_path, cache_dir, **{"training.resume_from": "auto"})
    assert LocalGRPOTrainer(auto, fixed_rollout, TASKS).step == 0  # auto with no checkpoint yet: a fresh start
    config = make_config(tmp_path, cache_dir)
    LocalGRPOTrainer(config, fixed_rollout, TASKS).train(max_steps=2)
    again = make_config(tmp_path, cache_dir, **{"training.resume_from": "auto"})
    with pytest.raises(ValueError, match="data order"):
        LocalGRPOTrainer(again, fixed_rollout, TASKS[:3])
    with pytest.raises(FileNotFoundError, match="resume_from"):
        LocalGRPOTrainer(make_config(tmp_path, cache_dir, **{"training.resume_from": str(tmp_path / "nope")}),
                         fixed_rollout, TASKS)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_gradient_accumulation_gives_the_same_update(tmp_path, cache_dir, mode):
    results = []
    for accum in (1, 3):
        config = make_config(tmp_path / str(accum), cache_dir, **{"training.grad_accum_steps": accum,
                                                                   "training.loss_agg_mode": mode})
        trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS)
        trainer.train_step()
        results.append(weights(trainer.model))
    # Kernels (CPU and GPU) reduce in a shape-dependent order, so micro-batched gradients differ in the last bits;
    # AdamW's first step moves a weight by about lr * sign(grad), which turns that noise into a sign flip where a
    # gradient is ~0. The same update means: nearly every weight equal to 1e-5, none further apart than a flipped
    # step (a dropped or doubled micro-batch changes the direction of many weights).
    diffs = torch.cat([(results[0][k] - results[1][k]).abs().flatten().float() for k in results[0]])
    assert (diffs <= 1e-5).float().mean() >= 0.999 and diffs.max() <= 2.5e-3, (diffs > 1e-5).float().mean()


def test_mini_batches_make_several_updates_per_step(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.ppo_mini_batch_size": 1})
    trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS)
    trainer.train_step()
    assert trainer.scheduler.last_epoch == 2  # two task groups -> two optimizer updates


def test_the_update_runs_on_update_torch_threads_and_rollouts_keep_torch_threads(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.torch_threads": 1, "training.update_torch_threads": 2})
    seen: dict[str, int] = {}

    def rollout(policy, tasks, group_size):
        seen["rollout"] = torch.get_num_threads()
        return fixed_rollout(policy, tasks, group_size)

    trainer = LocalGRPOTrainer(config, rollout, TASKS)
    update = trainer._update
    trainer._update = lambda rows: seen.setdefault("update", torch.get_num_threads()) and update(rows)
    trainer.train_step()
    assert seen == {"rollout": 1, "update": 2}
    assert torch.get_num_threads() == 1  # restored for the next rollout


def test_ppo_epochs_repeat_the_updates_over_the_same_rollouts(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.ppo_mini_batch_size": 1, "training.ppo_epochs": 2})
    trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS)
    trainer.train_step()
    assert trainer.scheduler.last_epoch == 4  # two task groups x two epochs (ROLL / verl ppo_epochs)


def test_seed_section_5_metric_names_are_logged(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.kl_coef": 0.1})
    logged = []
    trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS, log_fn=lambda m, s: logged.append(m))
    trainer.train_step()
    m = logged[0]
    for seed_name, ours in (("train/kl", "kl"), ("train/entropy", "entropy"), ("train/clipfrac", "actor/pg_clipfrac"),
                            ("train/policy_loss", "pg_loss"), ("train/grad_norm", "grad_norm")):
        assert m[seed_name] == m[ours], seed_name
    assert "lr" in m and "reward/mean" in m
    assert "train/value_loss" not in m  # GRPO trains no critic: no value loss to report


def test_kl_to_reference_and_entropy_bonus(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.kl_coef": 0.5, "training.entropy_coef": 0.01})
    trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS)
    assert trainer.ref_model is not None and not any(p.requires_grad for p in trainer.ref_model.parameters())
    first = trainer.train_step()
    assert first["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before the first update
    second = trainer.train_step()
    assert second["kl"] > 0
    assert second["loss"] == pytest.approx(second["pg_loss"] - 0.01 * second["entropy"] + 0.5 * second["kl"],
                                           abs=1e-5)


def test_roll_waves_and_max_traj_per_env(tmp_path, cache_dir):
    calls = []

    def counting(policy, tasks, group_size):
        calls.append(len(tasks))
        return fixed_rollout(policy, tasks, group_size)

    config = make_config(tmp_path, cache_dir, **{"env.env_groups": 1})
    LocalGRPOTrainer(config, counting, TASKS).train_step()
    assert calls == [1, 1]  # one group of envs, two waves
    with pytest.raises(ValueError, match="max_traj_per_env"):
        LocalGRPOTrainer(make_config(tmp_path, cache_dir, **{"env.env_groups": 1, "env.max_traj_per_env": 1}),
                         counting, TASKS)


def test_rollout_must_keep_group_layout(tmp_path, cache_dir):
    def short(policy, tasks, group_size):
        return fixed_rollout(policy, tasks, group_size)[:-1]

    trainer = LocalGRPOTrainer(make_config(tmp_path, cache_dir), short, TASKS)
    with pytest.raises(ValueError, match="group_size per task"):
        trainer.train_step()


def test_task_sampler_is_seeded_and_covers_each_epoch():
    sampler = TaskSampler(5, 2, seed=3)
    seen = [i for step in range(5) for i in sampler.indices_for_step(step)]
    assert sorted(seen[:5]) == list(range(5)) and sorted(seen[5:]) == list(range(5))
    assert seen == [i for step in range(5) for i in TaskSampler(5, 2, seed=3).indices_for_step(step)]
    assert seen != [i for step in range(5) for i in TaskSampler(5, 2, seed=4).indices_for_step(step)]


def test_fp16_needs_a_gpu(tmp_path, cache_dir):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(ValueError, match="fp16"):
        LocalGRPOTrainer(make_config(tmp_path, cache_dir, **{"training.precision": "fp16"}), fixed_rollout, TASKS)


def test_bf16_autocast_and_gradient_checkpointing_train_on_cpu(tmp_path, cache_dir):
    config = make_config(tmp_path, cache_dir, **{"training.precision": "bf16",
                                                 "training.gradient_checkpointing": True})
    trainer = LocalGRPOTrainer(config, fixed_rollout, TASKS)
    assert trainer.model.is_gradient_checkpointing
    assert next(trainer.model.parameters()).dtype == torch.float32  # fp32 master weights
    before = weights(trainer.model)
    metrics = trainer.train_step()
    assert torch.isfinite(torch.tensor(metrics["loss"]))
    assert any(not torch.equal(v, before[k]) for k, v in weights(trainer.model).items())


def test_training_curves_png_from_the_jsonl_tracker(tmp_path):
    import json

    from graph_planner.training.local.run import plot_training_curves

    assert plot_training_curves(tmp_path) is None  # no jsonl tracker ran: nothing to plot
    rows = [{"kind": "config", "config": {}}] + [
        {"kind": "metrics", "step": s, "metrics": {"reward/mean": 0.1 * s, "loss": 1.0 / s}} for s in (1, 2, 3)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    png = plot_training_curves(tmp_path)
    assert png == tmp_path / "training_curves.png" and png.read_bytes()[:4] == b"\x89PNG"


def test_checkpoint_is_uploaded_only_when_asked(tmp_path) -> None:
    from graph_planner.config.loader import load_run_config
    from graph_planner.training.local.run import publish_training

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple] = []

        def log_images(self, images) -> None:
            self.calls.append(("images", sorted(images)))

        def log_artifact(self, path, name, kind) -> None:
            self.calls.append(("artifact", str(path), name, kind))

    checkpoint = tmp_path / "step_3"
    (checkpoint / "model").mkdir(parents=True)
    curves = tmp_path / "training_curves.png"
    for flag, expected_artifacts in ((False, 0), (True, 1)):
        config = load_run_config(cli_overrides={"logging.wandb.log_checkpoints": flag,
                                                "experiment.run_name": "ck"}, write=False)
        recorder = Recorder()
        publish_training(recorder, config, curves, checkpoint)
        artifacts = [c for c in recorder.calls if c[0] == "artifact"]
        assert len(artifacts) == expected_artifacts
        assert ("images", ["training_curves"]) in recorder.calls
    assert artifacts[0][1:] == (str(checkpoint / "model"), "ck-model", "model")
