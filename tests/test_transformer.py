"""The Transformer of d2l-zh 10.7: checked against nn.TransformerEncoderLayer
and nn.TransformerDecoderLayer with copied weights, the book's state_dict
layout, and cached decoding against recomputing from scratch."""

import pytest
import torch
from torch import nn

import attention_utils as au
import book_reference as book
from unit_support import keep_mask

B, S, L, H_MODEL, HEADS, FFN = 3, 6, 5, 16, 4, 24


def copy_attention(ours, theirs):
    """Book-layout MultiHeadAttention -> nn.MultiheadAttention (zero biases if none)."""
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        theirs.out_proj.weight.copy_(ours.W_o.weight)
        if ours.W_q.bias is not None:
            theirs.in_proj_bias.copy_(torch.cat([ours.W_q.bias, ours.W_k.bias, ours.W_v.bias]))
            theirs.out_proj.bias.copy_(ours.W_o.bias)
        else:
            theirs.in_proj_bias.zero_()
            theirs.out_proj.bias.zero_()


def copy_linear_and_norm(ours, theirs):
    with torch.no_grad():
        theirs.weight.copy_(ours.weight)
        theirs.bias.copy_(ours.bias)


def ignore_mask(valid_lens, num_keys):
    """nn.Multihead/Transformer key_padding_mask: True = IGNORE (ours: True = attend)."""
    return ~keep_mask(valid_lens, 1, num_keys)[:, 0]


# --------------------------------------------------------------------------
# Small pieces
# --------------------------------------------------------------------------

def test_position_wise_ffn_is_relu_mlp_at_every_position():
    ffn = au.PositionWiseFFN(4, 4, 8).eval()
    assert ffn(torch.ones((2, 3, 4))).shape == (2, 3, 8)        # the book's example
    X = torch.randn(2, 3, 4)
    expected = torch.relu(X @ ffn.dense1.weight.T + ffn.dense1.bias) @ ffn.dense2.weight.T + ffn.dense2.bias
    torch.testing.assert_close(ffn(X), expected)
    torch.testing.assert_close(ffn(X)[:, 1], ffn(X[:, 1:2])[:, 0])   # position-wise
    assert list(ffn.state_dict()) == list(book.PositionWiseFFN(4, 4, 8).state_dict())


def test_add_norm_normalises_each_position_alone():
    add_norm = au.AddNorm([3, 4], 0.5).eval()
    assert add_norm(torch.ones((2, 3, 4)), torch.ones((2, 3, 4))).shape == (2, 3, 4)
    add_norm = au.AddNorm(4, 0.0)
    X, Y = torch.randn(2, 3, 4), torch.randn(2, 3, 4)
    Z = X + Y
    expected = (Z - Z.mean(-1, keepdim=True)) / torch.sqrt(Z.var(-1, unbiased=False, keepdim=True) + 1e-5)
    torch.testing.assert_close(add_norm(X, Y), expected)
    # Unlike BatchNorm, a sentence's result does not depend on the others in the batch.
    torch.testing.assert_close(add_norm(X[:1], Y[:1]), add_norm(X, Y)[:1])
    assert list(add_norm.state_dict()) == ["ln.weight", "ln.bias"]
    with pytest.raises(ValueError, match=r"one shape, got \(2, 3, 4\) and \(2, 3, 5\)"):
        add_norm(X, torch.randn(2, 3, 5))


def test_positional_encoding_offset():
    pe = au.PositionalEncoding(8, 0)
    X = torch.zeros(1, 3, 8)
    torch.testing.assert_close(pe(X, offset=4), pe.P[:, 4:7])
    torch.testing.assert_close(pe(torch.zeros(1, 7, 8))[:, 4:], pe(X, offset=4))
    with pytest.raises(ValueError, match="at offset 999"):
        pe(X, offset=999)


# --------------------------------------------------------------------------
# Against PyTorch's layers, with copied weights
# --------------------------------------------------------------------------

def encoder_pair(use_bias):
    ours = au.EncoderBlock(H_MODEL, H_MODEL, H_MODEL, H_MODEL, [H_MODEL], H_MODEL,
                           FFN, HEADS, 0.0, use_bias)
    theirs = nn.TransformerEncoderLayer(H_MODEL, HEADS, FFN, dropout=0.0,
                                        activation="relu", batch_first=True,
                                        norm_first=False)
    copy_attention(ours.attention, theirs.self_attn)
    copy_linear_and_norm(ours.ffn.dense1, theirs.linear1)
    copy_linear_and_norm(ours.ffn.dense2, theirs.linear2)
    copy_linear_and_norm(ours.addnorm1.ln, theirs.norm1)
    copy_linear_and_norm(ours.addnorm2.ln, theirs.norm2)
    return ours, theirs


@pytest.mark.parametrize("use_bias", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_encoder_block_equals_transformer_encoder_layer(use_bias, padded):
    ours, theirs = encoder_pair(use_bias)
    X = torch.randn(B, S, H_MODEL)
    valid_lens = torch.tensor([6, 2, 4]) if padded else None
    mask = ignore_mask(valid_lens, S) if padded else None
    expected = theirs(X, src_key_padding_mask=mask)             # train mode: no fast path
    torch.testing.assert_close(ours(X, valid_lens), expected)
    assert ours.attention.attention.attention_weights.shape == (B * HEADS, S, S)


def decoder_pair():
    ours = au.DecoderBlock(H_MODEL, H_MODEL, H_MODEL, H_MODEL, [H_MODEL], H_MODEL,
                           FFN, HEADS, 0.0, 0)
    theirs = nn.TransformerDecoderLayer(H_MODEL, HEADS, FFN, dropout=0.0,
                                        activation="relu", batch_first=True,
                                        norm_first=False)
    copy_attention(ours.attention1, theirs.self_attn)
    copy_attention(ours.attention2, theirs.multihead_attn)
    copy_linear_and_norm(ours.ffn.dense1, theirs.linear1)
    copy_linear_and_norm(ours.ffn.dense2, theirs.linear2)
    for k in (1, 2, 3):
        copy_linear_and_norm(getattr(ours, f"addnorm{k}").ln, getattr(theirs, f"norm{k}"))
    return ours, theirs


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("training", [True, False])
def test_decoder_block_equals_transformer_decoder_layer(padded, training):
    ours, theirs = decoder_pair()
    ours.train(training)
    X, memory = torch.randn(B, L, H_MODEL), torch.randn(B, S, H_MODEL)
    enc_valid_lens = torch.tensor([6, 2, 4]) if padded else None
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)   # True = ignore
    expected = theirs(X, memory, tgt_mask=causal,
                      memory_key_padding_mask=ignore_mask(enc_valid_lens, S) if padded else None)
    state = [memory, enc_valid_lens, [None]]
    actual, state = ours(X, state)
    torch.testing.assert_close(actual, expected)
    assert state[2][0] is not None and torch.equal(state[2][0], X)   # the cache


def test_books_decoder_block_sees_the_future_in_eval_mode():
    ours, _ = decoder_pair()
    theirs = book.DecoderBlock(H_MODEL, H_MODEL, H_MODEL, H_MODEL, [H_MODEL], H_MODEL,
                               FFN, HEADS, 0.0, 0)
    theirs.load_state_dict(ours.state_dict(), strict=True)
    X, memory = torch.randn(B, L, H_MODEL), torch.randn(B, S, H_MODEL)
    train_out = theirs.train()(X, [memory, None, [None]])[0]
    eval_out = theirs.eval()(X, [memory, None, [None]])[0]
    assert not torch.allclose(train_out, eval_out)               # the defect
    torch.testing.assert_close(ours.eval()(X, [memory, None, [None]])[0], train_out)


# --------------------------------------------------------------------------
# Whole encoder and decoder: the book's layout, caching
# --------------------------------------------------------------------------

V_SRC, V_TGT, LAYERS = 12, 14, 2


def transformer(impl=au, dropout=0.0):
    encoder = impl.TransformerEncoder(V_SRC, H_MODEL, H_MODEL, H_MODEL, H_MODEL, [H_MODEL],
                                      H_MODEL, FFN, HEADS, LAYERS, dropout)
    decoder = impl.TransformerDecoder(V_TGT, H_MODEL, H_MODEL, H_MODEL, H_MODEL, [H_MODEL],
                                      H_MODEL, FFN, HEADS, LAYERS, dropout)
    return impl.EncoderDecoder(encoder, decoder)


def test_state_dict_has_the_books_layout_and_loads_strictly():
    theirs, ours = transformer(book), transformer(au)
    keys = list(ours.state_dict())
    assert keys == list(theirs.state_dict())
    assert "encoder.blks.block1.attention.W_q.weight" in keys
    assert "decoder.blks.block0.attention2.W_o.weight" in keys
    assert "decoder.blks.block1.addnorm3.ln.bias" in keys and "decoder.dense.weight" in keys
    assert not any(k.endswith(".P") for k in keys)                # P is not saved
    ours.load_state_dict(theirs.state_dict(), strict=True)
    X, Y = torch.randint(0, V_SRC, (B, S)), torch.randint(0, V_TGT, (B, L))
    valid_lens = torch.tensor([6, 3, 1])
    theirs.train(), ours.train()                                  # where the book is right
    torch.testing.assert_close(ours(X, Y, valid_lens)[0], theirs(X, Y, valid_lens)[0])
    ours_again = transformer(au)
    ours_again.load_state_dict(ours.state_dict(), strict=True)   # round trip
    torch.testing.assert_close(ours_again.train()(X, Y, valid_lens)[0], ours(X, Y, valid_lens)[0])


def test_encoder_attention_weights_per_block():
    net = transformer().eval()
    X, valid_lens = torch.randint(0, V_SRC, (B, S)), torch.tensor([6, 3, 1])
    assert net.encoder(X, valid_lens).shape == (B, S, H_MODEL)
    weights = net.encoder.attention_weights
    assert len(weights) == LAYERS and weights[0].shape == (B * HEADS, S, S)
    assert (weights[1].reshape(B, HEADS, S, S)[1, :, :, 3:] == 0).all()


def greedy(net, X, valid_lens, steps, cached):
    """Greedy tokens, with the decoder's cache or recomputing every prefix."""
    enc_outputs = net.encoder(X, valid_lens)
    tokens = torch.full((X.shape[0], 1), 2)                      # '<bos>' = 2
    state = net.decoder.init_state(enc_outputs, valid_lens)
    logits = []
    for _ in range(steps):
        if cached:
            Y, state = net.decoder(tokens[:, -1:], state)
        else:
            Y, _ = net.decoder(tokens, net.decoder.init_state(enc_outputs, valid_lens))
        logits.append(Y[:, -1])
        tokens = torch.cat([tokens, Y[:, -1].argmax(-1, keepdim=True)], 1)
    return tokens[:, 1:], torch.stack(logits, 1)


def test_cached_greedy_decoding_equals_recomputing_from_scratch():
    torch.manual_seed(3)
    net = transformer().eval()
    X, valid_lens = torch.randint(3, V_SRC, (4, S)), torch.tensor([6, 4, 2, 5])
    with torch.no_grad():
        cached_tokens, cached_logits = greedy(net, X, valid_lens, 7, cached=True)
        weights = net.decoder.attention_weights                  # last cached step
        tokens, logits = greedy(net, X, valid_lens, 7, cached=False)
    assert torch.equal(cached_tokens, tokens)
    torch.testing.assert_close(cached_logits, logits)
    assert weights[0][0].shape == (4 * HEADS, 1, 7) and weights[1][1].shape == (4 * HEADS, 1, S)


def test_books_cached_decoding_differs_from_recomputing():
    torch.manual_seed(3)
    net = transformer(book).train()                              # train: its causal mask on
    X = torch.randint(3, V_SRC, (4, S))
    valid_lens = torch.tensor([6, 4, 2, 5])
    with torch.no_grad():
        _, cached_logits = greedy(net, X, valid_lens, 4, cached=True)
        _, logits = greedy(net, X, valid_lens, 4, cached=False)
    assert not torch.allclose(cached_logits, logits)             # every step at position 0


def test_predict_seq2seq_with_a_transformer():
    train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(64, 11, num_examples=128)
    encoder = au.TransformerEncoder(len(src_vocab), 16, 16, 16, 16, [16], 16, 32, 2, 1, 0.1)
    decoder = au.TransformerDecoder(len(tgt_vocab), 16, 16, 16, 16, [16], 16, 32, 2, 1, 0.1)
    net = au.EncoderDecoder(encoder, decoder)
    history = au.train_seq2seq(net, train_iter, 0.005, 2, tgt_vocab, "cpu", quiet=True)
    assert len(history) == 2
    translation, steps = au.predict_seq2seq(net, "march third", src_vocab, tgt_vocab, 11,
                                            "cpu", save_attention_weights=True)
    words = translation.split()
    assert net.training and len(steps) == min(len(words) + 1, 11)   # + '<eos>' unless cut
    self_attention, cross_attention = steps[-1]
    assert self_attention[0].shape == (2, 1, len(steps))         # (H, 1, keys so far)
    assert cross_attention[0].shape == (2, 1, 11)
    assert (cross_attention[0][:, :, 3:] == 0).all()             # 2 words + <eos>


def test_transformer_bad_inputs():
    net = transformer().eval()
    with pytest.raises(ValueError, match="integer token indices"):
        net.encoder(torch.zeros(2, 3), None)
    with pytest.raises(ValueError, match=r"\(B, steps\)"):
        net.decoder(torch.zeros(3, dtype=torch.long), [None, None, [None, None]])
    with pytest.raises(ValueError, match="num_heads"):
        au.EncoderBlock(16, 16, 16, 16, [16], 16, 24, 5, 0.0)
