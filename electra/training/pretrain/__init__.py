"""Stage 2: joint generator + discriminator pre-training (and the masked-LM baseline).

trainer.PretrainTrainer runs it (`pretrain(cfg)` is the entry point); config holds its options, models and
objective what it trains, loader the batches, checkpoint_manager what a checkpoint holds and checkpoint how
one is stored.
"""
