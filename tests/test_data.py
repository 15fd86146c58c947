"""Translation data: the book's vocabulary and fra-eng helpers (read locally,
never downloaded) and the generated date-translation task."""

import collections
import os

import pytest
import torch

import attention_utils as au

# --------------------------------------------------------------------------
# The book's helpers
# --------------------------------------------------------------------------


def test_vocab_follows_the_book():
    vocab = au.Vocab([["b", "a", "b"], ["c", "a", "b"]], min_freq=2,
                     reserved_tokens=["<pad>", "<bos>", "<eos>"])
    assert vocab.idx_to_token == ["<unk>", "<pad>", "<bos>", "<eos>", "b", "a"]
    assert len(vocab) == 6 and vocab.unk == 0
    assert vocab["b"] == 4 and vocab["c"] == 0                 # rare -> <unk>
    assert vocab[["a", ["b"][0], "zzz"]] == [5, 4, 0]
    assert vocab.to_tokens([4, 5]) == ["b", "a"] and vocab.to_tokens(3) == "<eos>"
    assert vocab.to_tokens(torch.tensor([5, 4])) == ["a", "b"]
    assert vocab.token_freqs == [("b", 3), ("a", 2), ("c", 1)]
    assert au.Vocab(["x", "x", "y"]).idx_to_token == ["<unk>", "x", "y"]   # flat list
    doubled = au.Vocab([["a"]], reserved_tokens=["<unk>", "<pad>", "<pad>"])
    assert doubled.idx_to_token == ["<unk>", "<pad>", "a"]   # no token twice


def test_preprocess_and_tokenize_nmt():
    text = au.preprocess_nmt("Go.\tVa !\nHi,\u202fyou!\tSalut\xa0!\nno tab here\nI run.\tJe cours.")
    assert text == "go .\tva !\nhi , you !\tsalut !\nno tab here\ni run .\tje cours ."
    source, target = au.tokenize_nmt(text)
    assert source == [["go", "."], ["hi", ",", "you", "!"], ["i", "run", "."]]
    assert target[2] == ["je", "cours", "."]
    source, _ = au.tokenize_nmt(text, num_examples=2)
    assert len(source) == 2                                     # the book returned 3


def test_truncate_pad_returns_a_new_list():
    line = [5, 6, 7]
    assert au.truncate_pad(line, 5, 0) == [5, 6, 7, 0, 0]
    assert au.truncate_pad(line, 2, 0) == [5, 6]
    padded = au.truncate_pad(line, 3, 0)
    padded.append(9)
    assert line == [5, 6, 7]
    with pytest.raises(ValueError, match="expected num_steps >= 0, got -1"):
        au.truncate_pad(line, -1, 0)


def test_build_array_nmt_counts_eos_and_not_pad_tokens():
    vocab = au.Vocab([["a", "b", "<pad>"]], reserved_tokens=["<pad>", "<bos>", "<eos>"])
    array, valid_len = au.build_array_nmt([["a"], ["a", "<pad>", "b"], ["a", "b", "a", "b"]],
                                          vocab, 4)
    pad, eos, a, b = vocab["<pad>"], vocab["<eos>"], vocab["a"], vocab["b"]
    assert array.tolist() == [[a, eos, pad, pad], [a, pad, b, eos], [a, b, a, b]]
    assert valid_len.tolist() == [2, 4, 4]                      # the book: 2, 3, 4
    assert array.dtype == torch.long


def test_load_array_batches_and_reproducible_shuffle():
    X, y = torch.arange(10).reshape(5, 2), torch.arange(5)
    batches = list(au.load_array((X, y), 2, is_train=False))
    assert [b[1].tolist() for b in batches] == [[0, 1], [2, 3], [4]]
    first = [b[1].tolist() for b in au.load_array((X, y), 5, generator=torch.Generator().manual_seed(3))]
    again = [b[1].tolist() for b in au.load_array((X, y), 5, generator=torch.Generator().manual_seed(3))]
    assert first == again and sorted(first[0]) == [0, 1, 2, 3, 4]


def test_read_data_nmt_never_downloads_and_says_where_to_put_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as error:
        au.read_data_nmt()
    message = str(error.value)
    expected = os.path.abspath(os.path.join("..", "data", "fra-eng", "fra.txt"))
    assert expected in message                                  # the book's location
    assert "fra-eng.zip" in message and "data_dir" in message
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        au.load_data_nmt(2, 5, data_dir=str(tmp_path / "elsewhere"))


def test_load_data_nmt_from_a_local_folder(tmp_path):
    lines = ["Go.\tVa !", "Hi.\tSalut !", "Run!\tCours !", "Run!\tCourez !",
             "Go.\tVa !", "Hi.\tSalut.", "Stop!\tStop !"]
    (tmp_path / "fra.txt").write_text("\n".join(lines), encoding="utf-8")
    train_iter, src_vocab, tgt_vocab = au.load_data_nmt(2, 4, num_examples=6,
                                                        data_dir=str(tmp_path))
    assert src_vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert "stop" not in src_vocab.token_to_idx                # 7th line: not read
    X, X_valid_len, Y, Y_valid_len = next(iter(train_iter))
    assert X.shape == Y.shape == (2, 4) and X_valid_len.shape == (2,)
    assert sum(len(batch[0]) for batch in train_iter) == 6


# --------------------------------------------------------------------------
# Synthetic dates: English words -> Chinese date format
# --------------------------------------------------------------------------

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen").split()
TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy "
                                        "eighty ninety".split()) if i >= 2}
ORDINALS = {w: i for i, w in enumerate(
    ("_ first second third fourth fifth sixth seventh eighth ninth tenth eleventh "
     "twelfth thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth "
     "nineteenth").split()) if i}
MONTHS = ("january february march april may june july august september october "
          "november december").split()


def number(words):
    """A small independent reader of English number words below 100."""
    total = 0
    for w in words:
        total += TENS.get(w, 0) + (ONES.index(w) if w in ONES else 0)
    return total


def read_date(source):
    """(year or None, month, day) from the words, written independently."""
    words = list(source)
    if words[0] == "the":
        of = words.index("of")
        day_words, month, rest = words[1:of], words[of + 1], words[of + 2:]
    else:
        month, rest = words[0], words[1:]
        cut = 2 if len(rest) > 1 and rest[0] in TENS and rest[1] in ORDINALS else 1
        day_words, rest = rest[:cut], rest[cut:]
    day = sum(TENS.get(w, 0) + ORDINALS.get(w, 0) for w in day_words) + \
        sum(20 if w == "twentieth" else 30 if w == "thirtieth" else 0 for w in day_words)
    year = None
    if rest:
        if rest[:2] == ["two", "thousand"]:
            year = 2000 + number([w for w in rest[2:] if w != "and"])
        elif rest[-1] == "hundred":
            year = 100 * number(rest[:-1])
        else:
            # 'nineteen' or 'twenty', then the rest: 'oh five', 'ninety nine'
            year = 100 * number(rest[:1]) + number([w for w in rest[1:] if w != "oh"])
    return year, MONTHS.index(month) + 1, day


def test_synthetic_pairs_are_correct_translations():
    pairs = au.synthetic_translation_pairs(500, seed=0)
    for source, target in pairs:
        year, month, day = read_date(source)
        expected = [str(month), "月", str(day), "日"]
        if year is not None:
            expected = list(str(year)) + ["年"] + expected
            assert 1900 <= year <= 2099
        assert target == expected, (source, target)


def test_synthetic_pairs_hand_checked_examples():
    pairs = au.synthetic_translation_pairs(2000, seed=0)
    as_text = {" ".join(s): " ".join(t) for s, t in pairs}
    assert as_text["july twenty fifth"] == "7 月 25 日"
    assert as_text["the thirteenth of august nineteen seventy seven"] == "1 9 7 7 年 8 月 13 日"


def test_synthetic_pairs_are_deterministic_and_varied():
    a = au.synthetic_translation_pairs(300, seed=0)
    assert a == au.synthetic_translation_pairs(300, seed=0)
    assert a != au.synthetic_translation_pairs(300, seed=1)
    assert au.synthetic_translation_pairs(50, seed=0) == a[:50]    # a prefix
    lengths = collections.Counter(len(s) for s, _ in au.synthetic_translation_pairs(2000))
    assert min(lengths) == 2 and max(lengths) == 10
    assert all(lengths[n] >= 10 for n in range(2, 11))         # every length occurs
    # Reordering: the year, said last, is written first.
    with_year = [(s, t) for s, t in a if "年" in t]
    assert 0.7 < len(with_year) / len(a) < 0.9
    assert au.synthetic_translation_pairs(0) == []
    with pytest.raises(ValueError, match="expected num_examples >= 0, got -1"):
        au.synthetic_translation_pairs(-1)


def test_load_data_synthetic_is_shaped_like_load_data_nmt():
    train_iter, src_vocab, tgt_vocab = au.load_data_synthetic(32, 11, num_examples=100)
    for vocab in (src_vocab, tgt_vocab):
        assert vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert "年" in tgt_vocab.token_to_idx and "march" in src_vocab.token_to_idx
    batches = list(train_iter)
    assert [len(b[0]) for b in batches] == [32, 32, 32, 4]
    X, X_valid_len, Y, Y_valid_len = batches[0]
    assert X.shape == Y.shape == (32, 11) and X.dtype == Y.dtype == torch.long
    rows = torch.arange(32)
    assert (Y[rows, Y_valid_len - 1] == tgt_vocab["<eos>"]).all()
    assert (X[rows, X_valid_len - 1] == src_vocab["<eos>"]).all()
    assert (Y_valid_len >= 5).all() and (X_valid_len >= 3).all()


def test_load_data_synthetic_is_deterministic_from_the_seed():
    def first_batch(seed):
        train_iter, _, _ = au.load_data_synthetic(8, 11, num_examples=64, seed=seed)
        return next(iter(train_iter))[0]

    torch.manual_seed(1)
    a = first_batch(0)
    torch.manual_seed(2)                                        # global RNG: no effect
    assert torch.equal(a, first_batch(0))
    assert not torch.equal(a, first_batch(1))
