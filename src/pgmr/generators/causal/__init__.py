"""Hugging Face decoder-only backend (Llama, SmolLM2, Qwen, ... or a tiny random preset), full or LoRA.

Trained by the seq2seq models' training loop (`pgmr.generators.seq2seq.train`) with the decoder-only parts of
`pgmr.generators.causal.train`: the prompt is the question under a fixed header, the target follows it, and
only the target tokens carry a loss. The generator
is `pgmr.generators.causal.generator.CausalGenerator`; `pgmr.generators.trained.load_trained` picks the
backend from a model card.
"""
