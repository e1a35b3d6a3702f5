"""Data that can be had offline, as NumPy arrays and mini-batches. No pyflink import.

- :mod:`.images`: scikit-learn's handwritten digits, CIFAR-10's binary batches, synthetic
  images, and :class:`ImageStream`, any of them replayed as a stream of batches;
- :mod:`.teacher`: the quickstart's generated stream (a noisy linear-softmax teacher);
- :mod:`.corpus`: lines of text files, and Shakespeare's complete works fetched once;
- :mod:`.zipf_clicks`: :class:`ZipfClicks`, user and item ids from Zipf laws with churn, and clicks.

Example::

    >>> from pyflink_tensair.datasets import teacher_classification_batch
    >>> teacher_classification_batch(0, batch_size=4, features=3, classes=2, seed=0).x.shape
    (4, 3)
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Loaded on first use: importing a package must not import its submodules (see pyflink_tensair._lazy).
_NAMES = {
    "ImageStream": ".images", "load_digits": ".images", "read_cifar10": ".images", "synthetic_images": ".images",
    "write_cifar10": ".images",
    "encoded_teacher_batch": ".teacher", "teacher_classification_batch": ".teacher",
    "read_corpus": ".corpus", "shakespeare_corpus": ".corpus", "ZipfClicks": ".zipf_clicks",
}
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time each name loads on first use
    from .corpus import read_corpus, shakespeare_corpus
    from .images import ImageStream, load_digits, read_cifar10, synthetic_images, write_cifar10
    from .teacher import encoded_teacher_batch, teacher_classification_batch
    from .zipf_clicks import ZipfClicks

__getattr__ = lazy_exports(__name__, _NAMES)
__all__ = sorted(_NAMES)
