"""Tiny models with random weights for the cross-encoder, sparse, late-interaction and
document-expansion families, built locally (no weights can be downloaded): they exercise code
paths, never quality."""

from __future__ import annotations

from pathlib import Path


def tiny_bert_config(vocab_size: int, **options):
    """A two-layer BERT of hidden size 32."""
    from transformers import BertConfig

    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        **options,
    )


def build_tiny_cross_encoder(folder: Path, tokenizer_source: Path, **options) -> Path:
    """A two-layer BERT cross-encoder with random weights and MiniLM's tokenizer; ``options``
    go to the BERT config (a larger ``initializer_range`` spreads the scores further apart)."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer.vocab_size, num_labels=1, **options)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _bert(factory, tokenizer, weights: Path | None):
    """A random two-layer BERT, or, with ``weights``, that BERT checkpoint (new heads random)."""
    if weights is not None:
        return factory.from_pretrained(weights)
    return factory(tiny_bert_config(tokenizer.vocab_size))


def build_tiny_bi_encoder(folder: Path, tokenizer_source: Path) -> Path:
    """A two-layer BERT with MiniLM's tokenizer, saved as a plain transformers folder, which
    sentence-transformers loads as a bi-encoder with mean pooling."""
    import torch
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    BertModel(tiny_bert_config(tokenizer.vocab_size)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_splade(folder: Path, tokenizer_source: Path, weights: Path | None = None) -> Path:
    """A two-layer BERT masked-LM head, which SparseEncoder loads as SPLADE (max pooling of
    log(1 + relu(logits)))."""
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    _bert(BertForMaskedLM, tokenizer, weights).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_tiny_colbert(folder: Path, tokenizer_source: Path, weights: Path | None = None) -> Path:
    """A two-layer BERT with MultiVectorEncoder's default head (a 128-dimension projection,
    punctuation mask, normalisation), saved as a MultiVectorEncoder."""
    import torch
    from sentence_transformers import MultiVectorEncoder
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    _bert(BertModel, tokenizer, weights).save_pretrained(folder / "bert")
    tokenizer.save_pretrained(folder / "bert")
    model = MultiVectorEncoder(str(folder / "bert"), device="cpu")
    model.save(str(folder / "colbert"))
    return folder / "colbert"


def build_tiny_doc2query(folder: Path, tokenizer_source: Path) -> Path:
    """A two-layer T5 with MiniLM's (BERT) tokenizer: [CLS] starts decoding, [SEP] ends it."""
    import torch
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    config = T5Config(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        d_kv=16,
        d_ff=64,
        num_layers=2,
        num_heads=2,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
        decoder_start_token_id=tokenizer.cls_token_id,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
