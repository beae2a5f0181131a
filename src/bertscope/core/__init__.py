"""The engine room: tokens, the batched forward, layers, pooling and the Encoder they make up."""
