"""Tiny model folders for tests that load a model by path (scripts, torchrun)."""


def save_tiny_model_dir(tmp_path_factory, build_model) -> str:
    """A model folder (weights + tokenizer) of `build_model(tokenizer)` over the tiny tokenizer."""
    from lmgym.policies import build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny_model")
    tokenizer = build_tiny_tokenizer()
    build_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)
