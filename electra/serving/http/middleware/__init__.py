"""ASGI middlewares, one per module: each wraps any app and knows no route."""
