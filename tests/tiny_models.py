"""Tiny model folders for tests that load a model by path (scripts, torchrun)."""


def save_tiny_model_dir(tmp_path_factory, build_model) -> str:
    """A model folder (weights + tokenizer) of `build_model(tokenizer)` over the tiny tokenizer."""
    from lmgym.policies import build_tiny_tokenizer

    folder = tmp_path_factory.mktemp("tiny_model")
    tokenizer = build_tiny_tokenizer()
    build_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def digit_answer_model(tokenizer):
    """The tiny model made into a bigram machine that answers one random digit: after the prompt's last
    "\n" every digit is equally likely, after a digit EOS. On level-0 sums (0..18) about 1 answer in 10
    is right, so groups have mixed rewards and GRPO really updates (what the comparison needs)."""
    import torch

    from lmgym.policies import build_tiny_model

    model = build_tiny_model(tokenizer)
    emb = model.get_input_embeddings().weight  # tied with the output layer
    with torch.no_grad():
        for layer in model.model.layers:  # the blocks start as identity maps; training moves them
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb[:, :2] = 0
        emb[tokenizer.convert_tokens_to_ids("\n"), 0] = 1.0
        for digit in "0123456789":
            emb[tokenizer.convert_tokens_to_ids(digit), :2] = torch.tensor([1.0, 2.0])
        emb[tokenizer.eos_token_id, 1] = 5.0
    return model
