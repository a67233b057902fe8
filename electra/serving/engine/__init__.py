"""The serving engine: models, queues and batching, every request's checks and post-processing; no HTTP."""
