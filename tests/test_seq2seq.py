"""The encoder-decoder API of d2l-zh 9.7 and 10.4, with the book's defects
fixed: packed encoder, a fixed context in Seq2SeqDecoder, predict_seq2seq
on the model's device with its mode restored, a bleu defined everywhere."""

import math

import pytest
import torch
import torch.nn.functional as F

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, snapshot

V_SRC, V_TGT, EMBED, H, LAYERS = 11, 13, 8, 16, 2


def models(attention=True):
    encoder = au.Seq2SeqEncoder(V_SRC, EMBED, H, LAYERS)
    decoder = (au.Seq2SeqAttentionDecoder if attention else au.Seq2SeqDecoder)(
        V_TGT, EMBED, H, LAYERS)
    return au.EncoderDecoder(encoder, decoder).eval()


def book_models(attention=True):
    encoder = book.Seq2SeqEncoder(V_SRC, EMBED, H, LAYERS)
    decoder = (book.Seq2SeqAttentionDecoder if attention else book.Seq2SeqDecoder)(
        V_TGT, EMBED, H, LAYERS)
    return book.EncoderDecoder(encoder, decoder).eval()


# --------------------------------------------------------------------------
# Interfaces, shapes and the book's state_dict layout
# --------------------------------------------------------------------------

def test_interfaces_raise_not_implemented():
    with pytest.raises(NotImplementedError):
        au.Encoder()(torch.zeros(1, 2, dtype=torch.long))
    with pytest.raises(NotImplementedError):
        au.Decoder().init_state(None)
    with pytest.raises(NotImplementedError):
        au.Decoder()(None, None)
    with pytest.raises(NotImplementedError):
        au.AttentionDecoder().attention_weights
    assert issubclass(au.Seq2SeqAttentionDecoder, au.AttentionDecoder)
    assert issubclass(au.Seq2SeqEncoder, au.Encoder)


def test_the_books_shape_example():
    encoder = au.Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2).eval()
    decoder = au.Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16,
                                         num_layers=2).eval()
    X = torch.zeros((4, 7), dtype=torch.long)
    state = decoder.init_state(encoder(X), None)
    output, state = decoder(X, state)
    assert output.shape == (4, 7, 10) and len(state) == 3
    assert state[0].shape == (4, 7, 16) and len(state[1]) == 2 and state[1][0].shape == (4, 16)
    assert len(decoder.attention_weights) == 7
    assert decoder.attention_weights[0].shape == (4, 1, 7)


@pytest.mark.parametrize("attention", [True, False])
def test_book_state_dict_loads_strictly_and_gives_the_same_outputs(attention):
    theirs, ours = book_models(attention), models(attention)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict(), strict=True)
    X = torch.randint(3, V_SRC, (3, 6))
    Y = torch.randint(3, V_TGT, (3, 5))
    valid_lens = torch.tensor([6, 6, 6])                      # no padding: no defect
    expected, _ = theirs(X, Y, valid_lens)
    actual, _ = ours(X, Y, valid_lens)
    torch.testing.assert_close(actual, expected)


def test_encoder_stops_at_each_sequences_end():
    encoder = au.Seq2SeqEncoder(V_SRC, EMBED, H, LAYERS).eval()
    X = torch.randint(3, V_SRC, (2, 6))
    valid_lens = torch.tensor([6, 3])
    outputs, state = encoder(X, valid_lens)
    alone_outputs, alone_state = encoder(X[1:, :3])            # the short one, unpadded
    torch.testing.assert_close(state[:, 1], alone_state[:, 0])
    torch.testing.assert_close(outputs[:3, 1], alone_outputs[:, 0])
    assert (outputs[3:, 1] == 0).all()
    torch.testing.assert_close(state[:, 0], encoder(X[:1])[1][:, 0])
    # The book's final state also read the three padding steps.
    theirs = book.Seq2SeqEncoder(V_SRC, EMBED, H, LAYERS).eval()
    theirs.load_state_dict(encoder.state_dict())
    assert not torch.allclose(theirs(X, valid_lens)[1][:, 1], alone_state[:, 0])


@pytest.mark.parametrize("lens, received", [
    (torch.tensor([0, 2]), r"got \[0, 2\]"),
    (torch.tensor([7, 2]), r"1\.\.6, got \[7, 2\]"),
    (torch.tensor([2.0, 2.0]), "torch.float32"),
    (torch.tensor([2]), r"of shape \(1,\)"),
])
def test_encoder_bad_valid_lens(lens, received):
    with pytest.raises(ValueError, match=received):
        au.Seq2SeqEncoder(V_SRC, EMBED, H, LAYERS)(torch.zeros(2, 6, dtype=torch.long), lens)


def test_decoders_reject_float_tokens():
    net = models()
    with pytest.raises(ValueError, match="expected X of integer token indices"):
        net(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(B, steps\)"):
        net.decoder(torch.zeros(3, dtype=torch.long), None)


@pytest.mark.parametrize("attention", [True, False])
def test_step_by_step_decoding_equals_teacher_forcing(attention):
    """Greedy prediction feeds one token per call; it must compute what one
    call on the whole sequence computes. The book's Seq2SeqDecoder failed:
    its context became the decoder's own state after the first step."""
    net = models(attention)
    X, valid_lens = torch.randint(3, V_SRC, (2, 6)), torch.tensor([6, 4])
    Y = torch.randint(3, V_TGT, (2, 5))
    whole, _ = net(X, Y, valid_lens)
    state = net.decoder.init_state(net.encoder(X, valid_lens), valid_lens)
    steps = []
    for t in range(Y.shape[1]):
        out, state = net.decoder(Y[:, t:t + 1], state)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), whole)


def test_books_plain_decoder_changes_its_context_step_by_step():
    net = book_models(attention=False)
    X, Y = torch.randint(3, V_SRC, (2, 6)), torch.randint(3, V_TGT, (2, 5))
    whole, _ = net(X, Y)
    state = net.decoder.init_state(net.encoder(X))
    steps = []
    for t in range(5):
        out, state = net.decoder(Y[:, t:t + 1], state)
        steps.append(out)
    assert not torch.allclose(torch.cat(steps, 1), whole)     # the defect we fixed


def test_attention_weights_ignore_padding_and_sum_to_one():
    net = models()
    X, valid_lens = torch.randint(3, V_SRC, (2, 6)), torch.tensor([6, 2])
    net(X, torch.randint(3, V_TGT, (2, 4)), valid_lens)
    weights = torch.stack(net.decoder.attention_weights, 0)   # (T, B, 1, S)
    assert weights.shape == (4, 2, 1, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(4, 2, 1))
    assert (weights[:, 1, :, 2:] == 0).all()


# --------------------------------------------------------------------------
# Loss and gradient clipping
# --------------------------------------------------------------------------

def test_masked_loss_the_books_example_and_valid_len_zero():
    loss = au.MaskedSoftmaxCELoss()
    values = loss(torch.ones(3, 4, 10), torch.ones((3, 4), dtype=torch.long),
                  torch.tensor([4, 2, 0]))
    torch.testing.assert_close(values, torch.tensor([math.log(10), math.log(10) / 2, 0.0]))


def test_masked_loss_against_cross_entropy_and_the_book():
    pred, label = torch.randn(2, 5, 7), torch.randint(0, 7, (2, 5))
    valid_len = torch.tensor([5, 3])
    ours = au.MaskedSoftmaxCELoss()(pred, label, valid_len)
    full = F.cross_entropy(pred.permute(0, 2, 1), label, reduction="none")   # (2, 5)
    torch.testing.assert_close(ours, torch.stack([full[0].sum(), full[1, :3].sum()]) / 5)
    torch.testing.assert_close(ours, book.MaskedSoftmaxCELoss()(pred, label, valid_len))
    before = snapshot(pred, label, valid_len)
    au.MaskedSoftmaxCELoss()(pred, label, valid_len)
    assert_unchanged(before, [pred, label, valid_len])
    with pytest.raises(ValueError, match=r"expected label of shape \(2, 5\), got \(2, 4\)"):
        au.MaskedSoftmaxCELoss()(pred, label[:, :4], valid_len)


def test_grad_clipping_scales_to_theta_and_skips_unused_parameters():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(3, 4))
    net[0](torch.randn(2, 3)).pow(2).sum().mul(100).backward()   # net[1] gets no grad
    assert net[1].weight.grad is None
    direction = net[0].weight.grad.clone()
    au.grad_clipping(net, 0.5)
    norm = torch.sqrt(net[0].weight.grad.pow(2).sum() + net[0].bias.grad.pow(2).sum())
    torch.testing.assert_close(norm, torch.tensor(0.5))
    torch.testing.assert_close(net[0].weight.grad / net[0].weight.grad.norm(),
                               direction / direction.norm())
    small = net[0].weight.grad.clone()
    au.grad_clipping(net, 10)                                    # under theta: unchanged
    torch.testing.assert_close(net[0].weight.grad, small)


# --------------------------------------------------------------------------
# Training and prediction on the synthetic task
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(64, 11, num_examples=300)
    net = au.EncoderDecoder(au.Seq2SeqEncoder(len(src_vocab), 16, 32, 1),
                            au.Seq2SeqAttentionDecoder(len(tgt_vocab), 16, 32, 1))
    history = au.train_seq2seq(net, train_iter, 0.01, 6, tgt_vocab, "cpu", quiet=True)
    return net, src_vocab, tgt_vocab, history


def test_train_seq2seq_returns_a_falling_per_token_loss(trained, capsys):
    *_, history = trained
    assert len(history) == 6 and history[-1] < 0.6 * history[0]
    assert history[0] < math.log(40)                             # per token, not per batch
    assert capsys.readouterr().out == ""                          # quiet


def test_train_seq2seq_prints_and_animates_like_the_book(capsys):
    train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(32, 11, num_examples=32)
    net = au.EncoderDecoder(au.Seq2SeqEncoder(len(src_vocab), 4, 8, 1),
                            au.Seq2SeqDecoder(len(tgt_vocab), 4, 8, 1))
    history = au.train_seq2seq(net, train_iter, 0.01, 20, tgt_vocab, "cpu")
    out = capsys.readouterr().out
    assert out.startswith(f"loss {history[-1]:.3f}, ") and "tokens/sec on cpu" in out
    figure = au.plt.gcf()                                        # the Animator's
    assert figure.axes[0].get_xlabel() == "epoch"
    assert list(figure.axes[0].lines[0].get_xdata()) == [10, 20]   # every 10 epochs


def test_predict_seq2seq_translates_and_returns_attention(trained):
    net, src_vocab, tgt_vocab, _ = trained
    net.train()
    translation, weights = au.predict_seq2seq(net, "march third", src_vocab, tgt_vocab,
                                              11, "cpu", save_attention_weights=True)
    assert net.training                                          # mode restored
    assert isinstance(translation, str) and len(weights) == len(translation.split()) + 1
    assert weights[0][0].shape == (1, 1, 11)                     # (B, 1, S) per step
    assert (weights[0][0][0, 0, 3:] == 0).all()                  # 2 words + <eos>
    net.eval()
    again, none = au.predict_seq2seq(net, "march third", src_vocab, tgt_vocab, 11, "cpu")
    assert again == translation and none == [] and not net.training


def test_predict_seq2seq_cuts_a_long_source_and_its_length(trained):
    net, src_vocab, tgt_vocab, _ = trained
    long_source = " ".join(["march"] * 20)
    translation, _ = au.predict_seq2seq(net, long_source, src_vocab, tgt_vocab, 11, "cpu")
    assert isinstance(translation, str)


def test_predict_seq2seq_refuses_another_device(trained):
    net, src_vocab, tgt_vocab, _ = trained
    with pytest.raises(ValueError, match=r"model's device cpu, got meta"):
        au.predict_seq2seq(net, "march third", src_vocab, tgt_vocab, 11, torch.device("meta"))
    with pytest.raises(ValueError, match="expected num_steps >= 1, got 0"):
        au.predict_seq2seq(net, "march third", src_vocab, tgt_vocab, 0, "cpu")


def test_predict_seq2seq_writes_nothing(trained):
    net, src_vocab, tgt_vocab, _ = trained
    parameters = snapshot(*net.parameters())
    tokens = list(tgt_vocab.idx_to_token)
    au.predict_seq2seq(net, "the first of may", src_vocab, tgt_vocab, 11, "cpu", True)
    assert_unchanged(parameters, list(net.parameters()))
    assert tgt_vocab.idx_to_token == tokens


# --------------------------------------------------------------------------
# BLEU
# --------------------------------------------------------------------------

@pytest.mark.parametrize("pred, label, k, expected", [
    ("a b c d", "a b c d", 2, 1.0),
    ("a b", "a b c d", 2, math.exp(1 - 4 / 2)),                  # brevity penalty only
    ("a b c d", "a b", 2, (2 / 4) ** 0.5 * (1 / 3) ** 0.25),   # no penalty: longer
    ("a x c", "a b c", 2, 0.0),                                  # no bigram matches
    ("a a a", "a b", 1, (1 / 3) ** 0.5),                         # clipped counts
])
def test_bleu_hand_computed(pred, label, k, expected):
    assert au.bleu(pred, label, k) == pytest.approx(expected)
    assert au.bleu(pred, label, k) == pytest.approx(book.bleu(pred, label, k))


@pytest.mark.parametrize("pred, label, k, expected", [
    ("", "a b", 2, 0.0),                                         # empty prediction
    ("", "", 2, 1.0),
    ("a", "a b c", 2, 0.0),                                      # label has bigrams, pred none
    ("a b", "a b", 4, 1.0),                                      # k above both lengths
    ("a b", "a", 2, 0.0),                                        # label has no bigram
])
def test_bleu_is_defined_where_the_book_fails(pred, label, k, expected):
    assert au.bleu(pred, label, k) == pytest.approx(expected)


def test_book_bleu_fails_on_short_predictions():
    with pytest.raises(ZeroDivisionError):
        book.bleu("a", "a b c", 2)
    with pytest.raises(ZeroDivisionError):
        book.bleu("a b", "a b", 3)
    with pytest.raises(ValueError, match="expected k >= 1, got 0"):
        au.bleu("a", "a", 0)
