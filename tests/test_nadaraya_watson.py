"""Nadaraya-Watson data, kernels and the parametric model (deck 02)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing import assert_close

import attention_utils as au
import book_reference as book
from unit_support import assert_unchanged, snapshot


def test_nw_target_is_the_books_function():
    x = torch.tensor([0.0, 1.0, 2.5])
    assert_close(au.nw_target(x), 2 * torch.sin(x) + x ** 0.8)


def test_nw_data_matches_the_books_recipe():
    x_train, y_train, x_test, y_truth = au.nw_data(generator=torch.Generator().manual_seed(1))
    assert x_train.shape == y_train.shape == (50,)
    assert (x_train[1:] >= x_train[:-1]).all()                  # sorted
    assert 0 <= x_train.min() and x_train.max() < 5
    assert_close(x_test, torch.arange(0, 5, 0.1))
    assert_close(y_truth, au.nw_target(x_test))
    noise = y_train - au.nw_target(x_train)
    assert 0.2 < noise.std() < 0.9                              # N(0, 0.5)
    # Reproducible from a generator; noise=0 gives the clean function.
    again = au.nw_data(generator=torch.Generator().manual_seed(1))
    assert_close(again[1], y_train)
    x_small, y_small, _, _ = au.nw_data(n_train=10, noise=0.0)
    assert x_small.shape == (10,)
    assert_close(y_small, au.nw_target(x_small))


def test_nw_kernel_regression_matches_the_books_cell():
    x_train, y_train, x_test, _ = au.nw_data()
    queries, keys, values = snapshot(x_test, x_train, y_train)
    y_hat, weights = au.nw_kernel_regression(x_test, x_train, y_train)
    # The book: repeat each test point over the 50 keys, softmax(-(x - x_i)^2 / 2).
    X_repeat = x_test.repeat_interleave(50).reshape((-1, 50))
    expected_weights = F.softmax(-(X_repeat - x_train) ** 2 / 2, dim=1)
    assert_close(weights, expected_weights)
    assert_close(y_hat, expected_weights @ y_train)
    assert y_hat.shape == (50,) and weights.shape == (50, 50)
    assert_unchanged([queries, keys, values], [x_test, x_train, y_train])


def test_nw_kernel_width():
    keys, values = torch.tensor([0.0, 1.0, 2.0]), torch.tensor([10.0, 20.0, 30.0])
    # A narrow kernel is nearest-neighbour regression, a wide one the mean.
    narrow, _ = au.nw_kernel_regression(torch.tensor([0.9]), keys, values, width=0.01)
    wide, weights = au.nw_kernel_regression(torch.tensor([0.9]), keys, values, width=1e4)
    assert_close(narrow, torch.tensor([20.0]))
    assert_close(wide, torch.tensor([20.0]), atol=1e-3, rtol=0)
    assert_close(weights, torch.full((1, 3), 1 / 3), atol=1e-6, rtol=0)
    _, w2 = au.nw_kernel_regression(torch.tensor([0.3]), keys, values, width=2.0)
    scaled = F.softmax(-((0.3 - keys) / 2.0) ** 2 / 2, dim=0)
    assert_close(w2[0], scaled)


def test_leave_one_out_matches_the_books_construction():
    x = torch.arange(5.0)
    others = au.leave_one_out(x)
    X_tile = x.repeat((5, 1))
    assert_close(others, X_tile[(1 - torch.eye(5)).type(torch.bool)].reshape((5, -1)))
    assert others.tolist()[2] == [0.0, 1.0, 3.0, 4.0]
    assert_close(x, torch.arange(5.0))


def test_nw_module_loads_the_books_state_dict_and_agrees():
    theirs = book.NWKernelRegression()
    ours = au.NWKernelRegression()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert list(ours.state_dict()) == ["w"] and ours.w.shape == (1,)
    x_train, y_train, x_test, _ = au.nw_data()
    keys, values = x_train.repeat((50, 1)), y_train.repeat((50, 1))
    before = snapshot(x_test, keys, values)
    assert_close(ours(x_test, keys, values), theirs(x_test, keys, values))
    assert_close(ours.attention_weights, theirs.attention_weights)
    assert ours.attention_weights.shape == (50, 50)
    assert_unchanged(before, [x_test, keys, values])


def test_nw_training_follows_the_book():
    # The book: leave-one-out keys, SGD lr 0.5, 5 epochs, summed squared error.
    x_train, y_train, _, _ = au.nw_data()
    keys, values = au.leave_one_out(x_train), au.leave_one_out(y_train)
    theirs = book.NWKernelRegression()
    ours = au.NWKernelRegression()
    ours.load_state_dict(theirs.state_dict())
    losses = []
    for net in (ours, theirs):
        trainer = torch.optim.SGD(net.parameters(), lr=0.5)
        loss = nn.MSELoss(reduction="none")
        history = []
        for _ in range(5):
            trainer.zero_grad()
            l = loss(net(x_train, keys, values), y_train)
            l.sum().backward()
            trainer.step()
            history.append(l.detach().sum().item())
        losses.append(history)
    assert_close(ours.w, theirs.w)
    assert_close(torch.tensor(losses[0]), torch.tensor(losses[1]))
    assert losses[0][-1] < losses[0][0]


def test_nw_module_gradcheck():
    net = au.NWKernelRegression().double()
    queries = torch.rand(4, dtype=torch.float64, requires_grad=True)
    keys = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    values = torch.rand(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(net, (queries, keys, values))


@pytest.mark.parametrize("call, received", [
    (lambda: au.nw_kernel_regression(torch.ones(2, 1), torch.ones(3), torch.ones(3)),
     r"\(2, 1\)"),
    (lambda: au.nw_kernel_regression(torch.ones(2), torch.ones(3), torch.ones(4)),
     r"\(3,\) and \(4,\)"),
    (lambda: au.nw_kernel_regression(torch.ones(2), torch.ones(3), torch.ones(3), width=0),
     "got 0"),
    (lambda: au.leave_one_out(torch.ones(2, 2)), r"\(2, 2\)"),
    (lambda: au.NWKernelRegression()(torch.ones(2), torch.ones(2, 3), torch.ones(3)),
     r"\(3,\)"),
    (lambda: au.NWKernelRegression()(torch.ones(3), torch.ones(2, 3), torch.ones(2, 3)),
     r"\(3,\), \(2, 3\)"),
    (lambda: au.NWKernelRegression()(torch.ones(2, 1), torch.ones(2, 3), torch.ones(2, 3)),
     r"\(2, 1\)"),
])
def test_bad_input(call, received):
    with pytest.raises(ValueError, match=received) as error:
        call()
    assert "expected" in str(error.value)
