"""Shared set-up for the unit tests of attention_utils.

* Plots render off-screen and every figure is closed after each test.
* Every test starts from the same seed, so failures reproduce.
* Hypothesis stays small and has no deadline: two shared cores, and the first
  call into torch can be slow.
* ``AU_IMPL=book`` swaps the book's formulation (tests/book_reference.py) in
  for attention_utils before any test module imports it. Running the suite
  that way shows which tests catch the book's defects, e.g.
  ``AU_IMPL=book .venv/bin/python -m pytest tests -q -p no:cacheprovider``.
"""

import os
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))

if os.environ.get("AU_IMPL") == "book":
    import book_reference  # noqa: E402

    sys.modules["attention_utils"] = book_reference

# Tiny tensors: one thread avoids contention on the two shared cores.
torch.set_num_threads(1)

settings.register_profile(
    "unit", max_examples=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("unit")


@pytest.fixture(autouse=True)
def _seed_and_close_figures():
    torch.manual_seed(0)
    yield
    plt.close("all")
