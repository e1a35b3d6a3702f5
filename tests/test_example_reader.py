"""The JVM's reading of one example (pyflinktensair.batching.Example) against Python's: the JSON
text json_example reads, checked as check_record checks it. Needs PyFlink's JVM, runs no job."""

import json

import numpy as np
import pytest

pytest.importorskip("pyflink")

from pyflink_tensair.core.guards import check_record  # noqa: E402
from pyflink_tensair.kafka.source import json_example  # noqa: E402

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def example():
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.java_gateway import get_gateway

    from pyflink_tensair.flink.environment import add_channel_jar

    add_channel_jar(StreamExecutionEnvironment.get_execution_environment())
    reader = get_gateway().jvm.pyflinktensair.batching.Example

    def read(text, by_hand=True):
        """``("ok", shape, float32 bits, label)`` or ``(reason, detail)``."""
        got = list(reader.readForTests(text, by_hand))
        if len(got) == 2:
            return tuple(got)
        label = got[2]
        # the batch holds float32: the reader's numbers as the batcher casts them (1e39 is inf there too)
        return ("ok", list(got[0]), [v.tobytes() for v in np.asarray(list(got[1]), np.float64).astype(np.float32)], label)

    read.by_hand = reader.readsByHand
    return read


def python_reads(text):
    """What to_batches' Python batcher makes of one JSON text: the same tuple shape as ``read``."""
    try:
        record = json_example(text)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return "not_a_record"
    refusal, features, label = check_record(record, features_shape=None, labelled=None)
    if refusal is not None:
        return refusal.reason
    with np.errstate(over="ignore"):  # a float64 beyond float32's range is inf in the batch
        return ("ok", list(features.shape), [v.tobytes() for v in features.astype(np.float32).ravel()], label)


def test_common_records_read_by_hand_to_the_bit_as_jackson_and_python_read_them(example):
    rng = np.random.default_rng(7)
    texts, by_hand = [], 0
    for i in range(1500):
        count = int(rng.integers(1, 6))
        values = rng.normal(size=count) * 10.0 ** rng.integers(-6, 6)
        digits = int(rng.integers(0, 16))
        numbers = ["%.*f" % (digits, v) if i % 3 else repr(float(v)) for v in values]
        label = "" if i % 7 == 0 else ', "y": %d' % rng.integers(-3, 1000)
        texts.append('{"x": [%s]%s}' % (", ".join(numbers), label) if i % 2 else '{%s"x":[%s]}' % (label[2:] + "," if label else "", ",".join(numbers)))
    for text in texts:
        jvm = example(text)
        assert jvm == example(text, False) == python_reads(text), text
        by_hand += bool(example.by_hand(text))
    assert by_hand == len(texts)  # 17 digits and exponents too (Double.parseDouble, as Jackson)


@pytest.mark.parametrize("text,reason", [
    ('{"x": [1, 2], "y": 1}', "ok"), ('{"x": [[1, 2], [3, 4]], "y": 0.5}', "ok"), ('{"x": 3, "y": null}', "ok"),
    ('{"x": [1, 2], "x": [3], "y": 1}', "ok"), ('{"y": 1, "x": [true, 2]}', "ok"), ('{"x": [], "y": 1}', "ok"),
    ('{"x": [1e400], "y": 1}', "non_finite"), ('{"x": [NaN], "y": 1}', "non_finite"), ('{"x": [1], "y": Infinity}', "non_finite"),
    ('{"x": [[1], [2, 3]], "y": 1}', "wrong_shape"), ('{"x": [1, [2]], "y": 1}', "wrong_shape"),
    ('{"x": [null], "y": 1}', "non_finite"), ('{"x": null, "y": 1}', "non_finite"), ('{"x": [{"a": 1}], "y": 1}', "wrong_dtype"), ('{"x": [1], "y": true}', "wrong_dtype"),
    ('{"x": [1], "y": "1"}', "wrong_dtype"), ('{"x": [1], "y": [1]}', "wrong_dtype"),
    ("[1, 2]", "not_a_record"), ('"text"', "not_a_record"), ('{"y": 1}', "not_a_record"), ("oops", "not_a_record"),
    ('{"x": [1]} {}', "not_a_record"), ('{"x": [01]}', "not_a_record"), ("", "not_a_record"),
])
def test_each_kind_of_record_gets_the_reason_python_gives_it(example, text, reason):
    jvm = example(text)
    assert jvm[0] == reason, jvm
    assert example(text, False) == jvm
    python = python_reads(text)
    assert (python[0] if isinstance(python, tuple) else python) == reason
    if reason == "ok":
        assert jvm[:3] == python[:3] and (jvm[3] == python[3] and type(jvm[3]) is type(python[3])), (jvm, python)


def test_numbers_beyond_float32_read_as_python_reads_them(example):
    """Read by hand now (an exponent), they must still come out as Python's reading makes them."""
    for text in ('{"x": [1e39, 2.5e-7], "y": 1}', '{"x": [-1E+39], "y": 0}', '{"x": [1e-50], "y": 0}'):
        assert example(text) == example(text, False) == python_reads(text), text


def test_strings_among_the_features_are_refused_where_numpy_would_read_them(example):
    """The one difference, on purpose: NumPy reads '1.5' as 1.5; the JVM refuses a string."""
    assert python_reads('{"x": ["1.5"], "y": 1}')[0] == "ok"
    assert example('{"x": ["1.5"], "y": 1}')[0] == "wrong_dtype"
