"""Tiny Hugging Face models, data and tokenizers built in memory (no hub).

Shared by the tests of this folder and by `trainer_run.py`, which the Trainer
tests start as a script (alone, or under `accelerate launch`).
"""
import torch
from torch.utils.data import Dataset

VOCAB = 96
SEQ = 16


def gpt2(dropout: float = 0.0, seed: int = 0):
    """A 2-layer GPT-2 with random weights (seeded on the CPU)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=48, n_layer=2, n_head=4,
                        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
                        bos_token_id=0, eos_token_id=1, pad_token_id=1)
    torch.manual_seed(seed)
    return GPT2LMHeadModel(config)


class TokenDataset(Dataset):
    """`n` sequences of SEQ tokens whose labels are their inputs (a causal
    LM's objective): arithmetic progressions modulo the vocabulary with a
    random start and a stride of 1..3, so there is something to learn in a
    few steps.  Token ids avoid 0 and 1 (bos/eos)."""

    def __init__(self, n: int, seed: int = 1):
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, VOCAB - 2, (n, 1), generator=g)
        stride = torch.randint(1, 4, (n, 1), generator=g)
        self.ids = 2 + (start + stride * torch.arange(SEQ)) % (VOCAB - 2)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def word_tokenizer():
    """A word-level fast tokenizer over VOCAB words "w0".."w{VOCAB-1}", built
    with the `tokenizers` package (what a hub tokenizer.json would hold)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, "<eos>": 1, **{f"w{i}": i for i in range(2, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>",
                                   pad_token="<eos>", unk_token="<eos>")


def gpt2_decisive(std: float = 0.2, seed: int = 0):
    """gpt2(seed=seed) in eval mode with every weight matrix redrawn from
    N(0, std^2) (seeded on the CPU).  GPT-2's own initialisation (std 0.02)
    gives nearly flat logits, so greedy decoding repeats one token and the
    top-2 logit gaps sit near float32 rounding; at std 0.2 the greedy
    continuations visit many tokens and the gaps are well above it."""
    model = gpt2(seed=seed).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=g) * std)
    return model


IMAGE = 32
LABELS = ("cat", "dog", "bird", "fish", "frog")


def vit(seed: int = 0):
    """A 2-layer ViT classifier for IMAGE x IMAGE RGB images (patches of 8)
    over the len(LABELS) LABELS, random weights seeded on the CPU."""
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(image_size=IMAGE, patch_size=8, num_channels=3, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                       id2label=dict(enumerate(LABELS)),
                       label2id={label: i for i, label in enumerate(LABELS)})
    torch.manual_seed(seed)
    return ViTForImageClassification(config).eval()


def vit_image_processor():
    """The PIL-backed ViT image processor (the default "fast" one needs
    torchvision) resizing to IMAGE x IMAGE."""
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    return ViTImageProcessorPil(size={"height": IMAGE, "width": IMAGE})


def random_images(n: int, seed: int = 0, size: int = 48):
    """n RGB PIL images of size x size with seeded uniform random pixels."""
    from PIL import Image

    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (n, size, size, 3), generator=g, dtype=torch.uint8)
    return [Image.fromarray(p.numpy()) for p in pixels]
