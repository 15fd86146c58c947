"""Benchmark attention_utils against the book's code and PyTorch's built-ins.

Run it with ``make bench`` (or ``.venv/bin/python benchmarks/bench_attention.py``;
add ``--module PATH`` to measure another copy of attention_utils.py). It is a
report, not a test: it always exits 0, and prints PASS or MISS for each
target of issue 2, section 3. ``benchmarks/README.md`` explains how the
numbers are made and how to read them. In short:

* One process, 2 intra-op threads and 1 inter-op thread, seed 0, eval mode.
* The candidates of a case take turns, round after round, in a rotating
  order; in each round a candidate runs a few times and keeps its fastest call.
* "median ms" is the median over rounds of that time.
* "ratio" is the median over rounds of (ours / other) within the same round;
  pairing the calls cancels most of the drift from other jobs on the machine.
  Below 1 means ours is faster (or, for memory, smaller).
* Peak memory is the running maximum of the CPU allocator's allocations
  minus frees, in time order, as recorded by torch.profiler.
* Before timing, every case asserts that all its candidates compute the same
  thing (``torch.testing.assert_close``), so a ratio never compares
  different computations.

The "book" baseline is d2l-zh 2.0's formulation (``d2l==0.17.6``), from
tests/book_reference.py, which the unit tests use too: ``sequence_mask`` by
boolean-index fill with -1e6 on a (B*L, S) view, ``repeat_interleave`` of
``valid_lens``, ``bmm(q, k^T) / sqrt(d)``, and the book's AdditiveAttention
and MultiHeadAttention.
"""

import gc
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

torch.set_num_threads(2)          # fixed threads: results must not depend on
torch.set_num_interop_threads(1)  # how many cores happen to be free



def load_module():
    """attention_utils from the repository, or from the file given with
    ``--module PATH`` (to measure a candidate change before making it)."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "attention_utils.py")
    if "--module" in sys.argv:
        path = sys.argv[sys.argv.index("--module") + 1]
    spec = importlib.util.spec_from_file_location("attention_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


au = load_module()


# The book's formulation (d2l-zh 2.0, d2l/torch.py), defects included: the
# same baseline the unit tests compare against, kept in one place.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import book_reference  # noqa: E402


# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------

def interleaved(candidates, budget, min_rounds=7, max_rounds=41, repeats=3,
                warmup=2):
    """Time each candidate in turns, round after round.

    In each round every candidate runs ``repeats`` times back to back and the
    round keeps its fastest call: with other jobs on the machine, a single
    call is often stalled by the scheduler (one of our 2 threads preempted),
    and the fastest of a few calls filters those stalls out. The order of the
    candidates rotates every round, so none always runs first or always runs
    right after the heaviest one. Rounds go on until ``budget`` seconds have
    passed (but at least ``min_rounds`` and at most ``max_rounds``), which
    bounds the run time on a loaded machine.

    Args:
        candidates: {name: zero-argument callable}.
    Returns:
        {name: [seconds, one per round]}.
    """
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times = {name: [] for name in names}
    gc.collect()
    gc.disable()                  # no collector pauses inside a timed call
    deadline = time.perf_counter() + budget
    try:
        for r in range(max_rounds):
            if r >= min_rounds and time.perf_counter() > deadline:
                break
            for name in names[r % len(names):] + names[:r % len(names)]:
                fastest = math.inf
                for _ in range(repeats):
                    start = time.perf_counter()
                    candidates[name]()
                    fastest = min(fastest, time.perf_counter() - start)
                times[name].append(fastest)
    finally:
        gc.enable()
    return times


def paired_ratio(times, ours, other):
    """Median over rounds of ours / other, timed in the same round."""
    return statistics.median(a / b for a, b in zip(times[ours], times[other]))


def peak_memory(fn):
    """Peak bytes the CPU allocator held during fn(), above what it held before.

    torch.profiler (profile_memory=True) records every allocation and free
    with its size; summing them in time order and taking the running maximum
    gives the peak. The result of fn() is freed before the profiler stops,
    which does not change the peak.
    """
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    # The profiler logs start/stop lines to the C-level stderr; hide them.
    sys.stderr.flush()
    saved_stderr = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)
    sizes = []

    def walk(nodes):
        for node in nodes:
            if node.tag == _EventType.Allocation and node.extra_fields.device.type == "cpu":
                sizes.append((node.start_time_ns, node.extra_fields.alloc_size))
            walk(node.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    current = peak = 0
    for _, size in sorted(sizes):
        current += size
        peak = max(peak, current)
    return peak


def check_peak_memory():
    """Sanity check: peak_memory must see known allocations exactly."""
    n = 1 << 20                                                  # 4 MiB of float32

    def two_alive():
        a = torch.ones(n)
        b = a + 1                  # a and b alive together: 8 MiB
        del a, b
        c = torch.ones(n)          # 4 MiB after both were freed
        return c

    measured = peak_memory(two_alive)
    expected = 2 * 4 * n
    # Allow a few small scalars (e.g. the 1 in a + 1) besides the big buffers.
    assert expected <= measured <= expected + 4096, (measured, expected)


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------

RESULTS = []   # (case, comparison, ratio, target, kind)
SPEC = {}


def report_times(case, details, times, rows):
    """Print one case: medians per candidate, then each ratio vs its target."""
    print(f"\n{case}, {details}")
    for name, t in times.items():
        q1, _, q3 = statistics.quantiles(t, n=4)
        print(f"  {name:<34} median {1e3 * statistics.median(t):8.2f} ms"
              f"   (IQR {1e3 * q1:.2f}-{1e3 * q3:.2f}, {len(t)} rounds)")
    for ours, other, target in rows:
        ratio = paired_ratio(times, ours, other)
        verdict = "PASS" if ratio <= target else "MISS"
        print(f"  {ours} / {other}: {ratio:.2f}x  (target <= {target}x)  {verdict}")
        RESULTS.append((case, f"time vs {other}", ratio, target))


def random_lens(shape, S, generator):
    """Lengths uniform in [1, S]: every query keeps at least one key, as in
    the book's examples; the empty row is the tests' business, not speed's."""
    return torch.randint(1, S + 1, shape, generator=generator)


def case_masked_softmax(g, budget):
    B, L, S = 8, 512, 512
    X = torch.randn(B, L, S, generator=g)
    for dims, target in ((1, 0.9), (2, 0.8)):
        lens = random_lens((B,) if dims == 1 else (B, L), S, g)
        X_book = X.clone()         # the book writes -1e6 into its input
        expected = book_reference.masked_softmax(X_book, lens)
        torch.testing.assert_close(au.masked_softmax(X, lens), expected)
        times = interleaved({
            "attention_utils.masked_softmax": lambda: au.masked_softmax(X, lens),
            "book masked_softmax": lambda: book_reference.masked_softmax(X_book, lens),
        }, budget)
        report_times(f"masked_softmax ({B}, {L}, {S}) {dims}-D lens", "forward", times, [
            ("attention_utils.masked_softmax", "book masked_softmax", target)])


def case_dot_product(g, budget):
    B, L, S, E = 8, 512, 512, 64
    q, k, v = (torch.randn(B, n, E, generator=g) for n in (L, S, S))
    lens = random_lens((B,), S, g)
    ours, book = au.DotProductAttention(0.0).eval(), book_reference.DotProductAttention(0.0).eval()

    def sdpa():
        keep = torch.arange(S)[None, None, :] < lens[:, None, None]  # (B, 1, S), True = attend
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    expected = book(q, k, v, lens)
    torch.testing.assert_close(ours(q, k, v, lens), expected)
    torch.testing.assert_close(sdpa(), expected)
    torch.testing.assert_close(ours.attention_weights, book.attention_weights)
    times = interleaved({
        "attention_utils.DotProductAttention": lambda: ours(q, k, v, lens),
        "book DotProductAttention": lambda: book(q, k, v, lens),
        "F.scaled_dot_product_attention": sdpa,
    }, budget)
    report_times(f"DotProductAttention ({B}, {L}, {S}, E={E})", "1-D valid_lens, forward",
                 times, [
        ("attention_utils.DotProductAttention", "book DotProductAttention", 0.8),
        ("attention_utils.DotProductAttention", "F.scaled_dot_product_attention", 1.1)])


def additive_pair(B, L, S, h, g):
    ours = au.AdditiveAttention(h, h, h, 0.0).eval()
    book = book_reference.AdditiveAttention(h, h, h, 0.0).eval()
    book.load_state_dict(ours.state_dict())    # the book's state_dict loads into ours
    q, k, v = (torch.randn(B, n, h, generator=g) for n in (L, S, S))
    lens = random_lens((B,), S, g)
    expected = book(q, k, v, lens)
    torch.testing.assert_close(ours(q, k, v, lens), expected)
    torch.testing.assert_close(ours.attention_weights, book.attention_weights)
    return ours, book, (q, k, v, lens)


def case_additive_time(g, budget):
    B, L, S, h = 8, 128, 128, 64
    ours, book, args = additive_pair(B, L, S, h, g)
    times = interleaved({
        "attention_utils.AdditiveAttention": lambda: ours(*args),
        "book AdditiveAttention": lambda: book(*args),
    }, budget)
    report_times(f"AdditiveAttention ({B}, {L}, {S}, h={h})",
                 "1-D valid_lens, forward with grad", times, [
        ("attention_utils.AdditiveAttention", "book AdditiveAttention", 0.85)])


def case_additive_memory(g, repeats=3):
    B, L, S, h = 8, 256, 256, 64
    ours, book, args = additive_pair(B, L, S, h, g)
    with torch.inference_mode():
        mine = [peak_memory(lambda: ours(*args)) for _ in range(repeats)]
        theirs = [peak_memory(lambda: book(*args)) for _ in range(repeats)]
    case = f"AdditiveAttention ({B}, {L}, {S}, h={h})"
    one = B * L * S * h * 4
    print(f"\n{case}, 1-D valid_lens, inference "
          f"(one (B, L, S, h) float32 tensor = {one / 2**20:.0f} MiB)")
    print(f"  {'attention_utils.AdditiveAttention':<34} peak {max(mine) / 2**20:8.1f} MiB")
    print(f"  {'book AdditiveAttention':<34} peak {max(theirs) / 2**20:8.1f} MiB")
    ratio, target = max(mine) / max(theirs), 0.6
    print(f"  attention_utils / book peak memory: {ratio:.2f}x  (target <= {target}x)  "
          f"{'PASS' if ratio <= target else 'MISS'}")
    RESULTS.append((case, "peak memory vs book (inference)", ratio, target))


def case_multihead(g, budget):
    # Each call takes 0.2-2 s depending on load: fewer, shorter rounds.
    B, L, S, H, h = 8, 512, 512, 8, 512
    ours = au.MultiHeadAttention(h, h, h, h, H, 0.0).eval()
    book = book_reference.MultiHeadAttention(h, h, h, h, H, 0.0).eval()
    book.load_state_dict(ours.state_dict())
    torch_mha = nn.MultiheadAttention(h, H, bias=False, batch_first=True).eval()
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat(
            [ours.W_q.weight, ours.W_k.weight, ours.W_v.weight]))
        torch_mha.out_proj.weight.copy_(ours.W_o.weight)
    X = torch.randn(B, L, h, generator=g)      # self-attention: q = k = v = X
    lens = random_lens((B,), S, g)

    def builtin():
        ignore = torch.arange(S)[None, :] >= lens[:, None]  # (B, S), True = IGNORE
        return torch_mha(X, X, X, key_padding_mask=ignore, need_weights=True,
                         average_attn_weights=False)

    expected = book(X, X, X, lens)
    torch.testing.assert_close(ours(X, X, X, lens), expected)
    output, weights = builtin()
    torch.testing.assert_close(output, expected)
    torch.testing.assert_close(weights.reshape(B * H, L, S),
                               ours.attention.attention_weights)
    times = interleaved({
        "attention_utils.MultiHeadAttention": lambda: ours(X, X, X, lens),
        "book MultiHeadAttention": lambda: book(X, X, X, lens),
        "nn.MultiheadAttention (weights)": builtin,
    }, budget, min_rounds=5, repeats=2)
    report_times(f"MultiHeadAttention ({B}, {L}, {S}, H={H})",
                 f"h={h}, self-attention, 1-D valid_lens, forward with grad", times, [
        ("attention_utils.MultiHeadAttention", "book MultiHeadAttention", 0.9),
        ("attention_utils.MultiHeadAttention", "nn.MultiheadAttention (weights)", 1.05)])


def main():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    check_peak_memory()
    start = time.perf_counter()
    print(f"module {os.path.relpath(au.__file__)}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{torch.get_num_interop_threads()} inter-op thread, float32, CPU")
    print("ratio = median over rounds of (ours / other) timed in the same round; "
          "< 1 is better")
    case_masked_softmax(g, budget=12)      # seconds of timing, per lens variant
    case_dot_product(g, budget=20)
    case_additive_time(g, budget=15)
    case_additive_memory(g)
    case_multihead(g, budget=35)

    print(f"\nSummary ({time.perf_counter() - start:.0f} s)")
    width = max(len(case) for case, *_ in RESULTS)
    for case, comparison, ratio, target in RESULTS:
        verdict = "PASS" if ratio <= target else "MISS"
        print(f"  {case:<{width}}  {comparison:<40} {ratio:5.2f}x  <= {target:<4}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
