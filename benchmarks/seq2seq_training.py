"""Measure the live-training configurations of decks 06 and 07.

Run ``.venv/bin/python benchmarks/seq2seq_training.py`` (about a minute). It
trains, on the generated date-translation task (``au.load_data_synthetic``),
the plain GRU encoder-decoder, the Bahdanau one and a small Transformer, each
with one intra-op thread, and prints for each: training CPU seconds (process
time, so other jobs on the machine inflate it less than wall time), wall
seconds, exact-match accuracy on 300 held-out pairs (seed 1) overall and by
source length, BLEU (k=2) and parameter count. It is a report, not a test.
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import attention_utils as au  # noqa: E402

NUM_STEPS, BATCH_SIZE = 11, 64


def build(kind, src_vocab, tgt_vocab, num_hiddens):
    if kind == "transformer":
        h = num_hiddens
        encoder = au.TransformerEncoder(len(src_vocab), h, h, h, h, [h], h, 2 * h, 4, 2, 0.0)
        decoder = au.TransformerDecoder(len(tgt_vocab), h, h, h, h, [h], h, 2 * h, 4, 2, 0.0)
    else:
        encoder = au.Seq2SeqEncoder(len(src_vocab), 32, num_hiddens, 1)
        decoder_class = au.Seq2SeqAttentionDecoder if kind == "bahdanau" else au.Seq2SeqDecoder
        decoder = decoder_class(len(tgt_vocab), 32, num_hiddens, 1)
    return au.EncoderDecoder(encoder, decoder)


def measure(kind, num_epochs, num_examples=1000, lr=0.005, num_hiddens=32):
    torch.manual_seed(0)
    train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(
        BATCH_SIZE, NUM_STEPS, num_examples=num_examples, seed=0)
    net = build(kind, src_vocab, tgt_vocab, num_hiddens)
    wall, cpu = time.perf_counter(), time.process_time()
    history = au.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, "cpu", quiet=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    by_length, total_bleu = {}, 0.0
    test = au.synthetic_translation_pairs(300, seed=1)
    for source, target in test:
        translation, _ = au.predict_seq2seq(net, " ".join(source), src_vocab, tgt_vocab,
                                            NUM_STEPS, "cpu")
        group = f"{min(len(source), 9) // 2 * 2}-{min(len(source), 9) // 2 * 2 + 1}"
        by_length.setdefault(group, []).append(translation == " ".join(target))
        total_bleu += au.bleu(translation, " ".join(target), 2)
    accuracy = sum(sum(v) for v in by_length.values()) / len(test)
    groups = ", ".join(f"{k}: {sum(v) / len(v):.2f}" for k, v in sorted(by_length.items()))
    print(f"{kind:11s} epochs {num_epochs:3d}  train {cpu:5.1f} s CPU ({wall:5.1f} s wall)  "
          f"loss {history[-1]:.3f}  accuracy {accuracy:.3f}  bleu {total_bleu / len(test):.3f}  "
          f"params {sum(p.numel() for p in net.parameters())}  by source length: {groups}",
          flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    measure("bahdanau", 10)
    measure("plain", 10)                     # the same number of epochs
    measure("plain", 30)                     # about the same training time
    measure("transformer", 10, num_examples=2000, lr=0.01)   # 2 layers, 4 heads, no dropout
