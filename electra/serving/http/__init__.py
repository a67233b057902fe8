"""The HTTP layer: the Litestar app, its routes (one module per protocol), the error mapping and the HTTP
servers; over the engine (electra.serving.engine)."""
