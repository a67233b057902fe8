"""What a pre-training run reports about itself: the training meter and the metrics log, FLOPs and MFU, the
discriminator's ROC AUC, collapse detection, and the curves' plot."""
