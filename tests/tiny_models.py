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


def build_tiny_sentence_transformer(
    folder: Path, tokenizer_source: Path, similarity_fn_name: str
) -> Path:
    """``build_tiny_bi_encoder``'s model (mean pooling, no Normalize module) saved as a
    sentence-transformers model whose config_sentence_transformers.json names
    ``similarity_fn_name``, as a model trained with that similarity is published."""
    from sentence_transformers import SentenceTransformer

    bert = build_tiny_bi_encoder(folder.with_name(folder.name + "-bert"), tokenizer_source)
    model = SentenceTransformer(str(bert), device="cpu", similarity_fn_name=similarity_fn_name)
    model.save(str(folder))
    return folder


def build_tiny_bpe_bi_encoder(folder: Path, texts: list[str], vocab_size: int = 400) -> Path:
    """A two-layer random BERT that reads with a byte-level BPE trained on ``texts`` (RoBERTa's
    kind of tokenizer, where a word's leading space is part of its token), saved as a plain
    transformers folder that sentence-transformers loads as a bi-encoder. Words the BPE never
    saw split into many tokens."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import BertModel, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<pad>", "<unk>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    backend.post_processor = processors.RobertaProcessing(
        ("</s>", backend.token_to_id("</s>")), ("<s>", backend.token_to_id("<s>"))
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<s>",
        eos_token="</s>",
        cls_token="<s>",
        sep_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    torch.manual_seed(0)
    BertModel(tiny_bert_config(backend.get_vocab_size())).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# A ColBERT's settings: query and document markers (BERT's unused tokens, as Stanford's
# ColBERTv2 marks [Q] and [D]), the query width (the ColBERT paper's Nq, 32) and a document
# length shorter than the tokenizer's 512, so that the checkpoint's lengths are not its.
COLBERT_QUERY_MARKER, COLBERT_DOCUMENT_MARKER = "[unused0]", "[unused1]"
COLBERT_QUERY_LENGTH, COLBERT_DOCUMENT_LENGTH = 32, 180


def build_tiny_splade(folder: Path, tokenizer_source: Path, weights: Path | None = None) -> Path:
    """An inference-free SPLADE (as opensearch-project's inference-free SPLADE models are
    built): documents through a two-layer BERT masked-LM head and SPLADE's max pooling of
    log(1 + relu(logits)); queries through a static weight per vocabulary term
    (``SparseStaticEmbedding``, zero for the special tokens), routed by the task. So a query
    and a document of the same text get different vectors."""
    import torch
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sparse_encoder.modules import SparseStaticEmbedding, SpladePooling
    from transformers import AutoTokenizer, BertForMaskedLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    torch.manual_seed(0)
    _bert(BertForMaskedLM, tokenizer, weights).save_pretrained(folder / "mlm")
    tokenizer.save_pretrained(folder / "mlm")
    term_weights = torch.rand(tokenizer.vocab_size)
    term_weights[tokenizer.all_special_ids] = 0
    router = Router.for_query_document(
        query_modules=[SparseStaticEmbedding(tokenizer, weight=term_weights)],
        document_modules=[
            Transformer(str(folder / "mlm"), transformer_task="fill-mask"),
            SpladePooling(pooling_strategy="max"),
        ],
    )
    SparseEncoder(modules=[router], device="cpu").save(str(folder / "splade"))
    return folder / "splade"


def build_tiny_colbert(folder: Path, tokenizer_source: Path, weights: Path | None = None) -> Path:
    """A two-layer BERT as a ColBERT with those settings, saved as a MultiVectorEncoder:
    queries start with the query marker and are padded with [MASK] (not attended to) to 32
    tokens or cut there; documents start with the document marker, are cut at 180 tokens and
    lose their punctuation; a 128-dimension projection, then normalisation. So a query and a
    document of the same text get different vectors."""
    import string

    import torch
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask
    from transformers import AutoTokenizer, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    # One token each, as PyLate registers them.
    markers = [COLBERT_QUERY_MARKER, COLBERT_DOCUMENT_MARKER]
    tokenizer.add_special_tokens({"additional_special_tokens": markers})
    torch.manual_seed(0)
    _bert(BertModel, tokenizer, weights).save_pretrained(folder / "bert")
    tokenizer.save_pretrained(folder / "bert")
    transformer = Transformer(
        str(folder / "bert"),
        document_length=COLBERT_DOCUMENT_LENGTH,
        query_expansion={"strategy": "fixed", "attend": False, "length": COLBERT_QUERY_LENGTH},
    )
    modules = [
        transformer,
        Dense(
            transformer.get_embedding_dimension(),
            128,
            bias=False,
            activation_function=torch.nn.Identity(),
            module_input_name="token_embeddings",
        ),
        MultiVectorMask(skiplist_words=list(string.punctuation)),
        Normalize(module_input_name="token_embeddings"),
    ]
    prompts = {"query": f"{COLBERT_QUERY_MARKER} ", "document": f"{COLBERT_DOCUMENT_MARKER} "}
    model = MultiVectorEncoder(modules=modules, prompts=prompts, device="cpu")
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
