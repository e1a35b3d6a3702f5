"""join_labels' state machine (pyflink_tensair.online.labels.JoinLabels), driven without Flink: keyed
state and timers faked per key, records with their event times."""

import json

from pyflink_tensair.datasets.clicks import ClickStream
from pyflink_tensair.online.labels import JoinLabels, training_record


class Value:
    def __init__(self):
        self._value = None

    def value(self):
        return self._value

    def update(self, value):
        self._value = value

    def clear(self):
        self._value = None


class Harness:
    """One JoinLabels with per-key state, event-time timers and a watermark."""

    def __init__(self, timeout_ms=100, retention_ms=50, default_label=None):
        self.function = JoinLabels(timeout_ms, retention_ms, True, default_label, lambda t: json.loads(t)["y"], "join")
        self.states = {}
        self.timers = set()  # (time, key)
        self.out = []
        self.key = None
        self.now = None
        self.function.open(self)  # the harness is its runtime context
        self._bind(None)

    # runtime context and ctx
    def get_state(self, descriptor):
        return _KeyedValue(self, descriptor.name)

    def timer_service(self):
        return self

    def register_event_time_timer(self, at):
        self.timers.add((at, self.key))

    def delete_event_time_timer(self, at):
        self.timers.discard((at, self.key))

    def current_processing_time(self):
        raise AssertionError("event time only")

    def get_current_key(self):
        return (self.key,)

    def _bind(self, key):
        self.key = key

    # driving
    def event(self, key, t):
        self._run(key, t, self.function.process_element1, json.dumps({"id": key, "x": [1.0]}))

    def label(self, key, t, y=1):
        self._run(key, t, self.function.process_element2, json.dumps({"id": key, "y": y}))

    def watermark(self, t):
        for at, key in sorted(self.timers):
            if at <= t:
                self.timers.discard((at, key))
                self.key, self.now = key, at
                self._collect(self.function.on_timer(at, self))

    def _run(self, key, t, method, value):
        self.key, self.now = key, t
        self._collect(method(value, self))

    def timestamp(self):
        return self.now

    def _collect(self, results):
        for item in results or ():
            self.out.append(item if isinstance(item, tuple) else ("record", item))

    def kinds(self):
        found = []
        for what, item in self.out:
            if what == "record":
                found.append(("record", json.loads(item)["y"], json.loads(item)["timed_out"]))
            elif "default_label" in json.loads(item):
                found.append(("timeout",))
            else:
                found.append(("dead", json.loads(item)["reason"]))
        return found


class _KeyedValue:
    def __init__(self, harness, name):
        self.harness, self.name = harness, name

    def _slot(self):
        return self.harness.states.setdefault((self.name, self.harness.key), Value())

    def value(self):
        return self._slot().value()

    def update(self, value):
        self._slot().update(value)

    def clear(self):
        self._slot().clear()


def make(**kwargs):
    return Harness(**kwargs)


def test_label_after_its_event_joins_once_and_a_second_label_is_a_dead_letter():
    h = make()
    h.event("a", 0)
    h.label("a", 30, y=1)
    h.label("a", 40, y=0)
    h.watermark(1000)
    assert h.kinds() == [("record", 1, False), ("dead", "second_label")]
    assert all(v.value() is None for v in h.states.values())  # cleared after the retention


def test_timeout_gives_the_default_label_and_a_later_label_is_a_dead_letter_whatever_the_order():
    for watermark_first in (True, False):
        h = make(default_label=0)
        h.event("a", 0)
        if watermark_first:
            h.watermark(100)
        h.label("a", 120, y=1)  # after t_event + timeout: late even when it overtakes the watermark
        h.watermark(1000)
        assert h.kinds() == [("timeout",), ("record", 0, True), ("dead", "label_after_timeout")], watermark_first


def test_a_label_that_overtakes_its_event_but_is_past_its_timeout_is_late_not_joined():
    h = make(default_label=0)
    h.label("a", 120, y=1)  # the labels' stream runs ahead of the events'
    h.event("a", 0)
    h.watermark(1000)
    assert h.kinds() == [("timeout",), ("record", 0, True), ("dead", "label_after_timeout")]


def test_a_label_before_its_event_waits_for_it_and_one_without_event_is_a_dead_letter():
    h = make()
    h.label("a", 50)
    h.event("a", 20)  # delivered after its label, but older
    h.label("b", 60)
    h.watermark(70)
    h.label("c", 80)
    h.event("c", 90)  # newer than its label: the label had no event
    h.watermark(1000)
    assert h.kinds() == [("record", 1, False), ("dead", "label_without_event"), ("dead", "label_without_event"),
                         ("timeout",)]


def test_training_records_and_the_click_stream_are_what_text_batches_reads():
    from pyflink_tensair.kafka.source import json_example

    record = training_record('{"id": 1, "x": [0.5], "t": 3}', 1)
    assert json_example(record) == ([0.5], 1)
    stream = ClickStream(events=400, seed=3)
    times = [stream.label_time_ms(j) for j in range(stream.labels)]
    assert times == sorted(times) and 0.7 * 400 < stream.labels < 0.9 * 400
    for j in range(0, stream.labels, 37):
        label = json.loads(stream.label_text(j))
        assert label["t"] - stream.event_time_ms(label["id"]) >= 2000
    before = [stream.click(i) for i in range(200)]
    assert ClickStream(events=400, seed=3).click(5) == before[5]  # seeded
