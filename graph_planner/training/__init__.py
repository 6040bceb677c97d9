"""GRPO training, one objective (grpo.py) and two engines: ``local/`` (one process, HF policy) and ``verl/``
(``main_ppo`` as a Ray job, submitted through ``ray/``), with the SFT warm start in ``sft/``; ``commands.py`` is
``gp train``, ``learning_report.py`` / ``learning_curve.py`` measure a run the same way for either engine."""
