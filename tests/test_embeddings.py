"""Embeddings for the ids a stream brings (issue 28): the id table (admission, eviction, expiry,
bounded memory, state), the reassignment notices, and replicas that reset reassigned rows, with
synchronous replicas still bit-identical. No Flink here (test_flink_local.py runs the table in a job)."""

import functools

import numpy as np
import pytest

from pyflink_tensair import TrainConfig
from pyflink_tensair.config import ModelUpdates
from pyflink_tensair.core import wire
from pyflink_tensair.core.messages import Batch, GradientMessage
from pyflink_tensair.core.model_updates import ModelUpdate, ModelView, decode_update, encode_update
from pyflink_tensair.core.row_resets import (NOTICES, Reassignment, RowResets, TableNotices, TableSpec, batch_notices,
                                             decode_notices, encode_notices, fresh_rows)
from pyflink_tensair.embeddings import CountMinSketch, IdTable
from pyflink_tensair.embeddings.window import RecentReassignments
from pyflink_tensair.errors import ConfigError, DataError, WireFormatError
from pyflink_tensair.word2vec.growing import GrowingVocabulary


def _zipf_ids(n, seed=0, a=1.2):
    return [int(i) for i in np.random.default_rng(seed).zipf(a, n)]


def test_the_sketch_never_undercounts_and_halving_ages_counts():
    sketch = CountMinSketch(width=256, depth=4)
    ids = _zipf_ids(5000)
    for i in ids:
        sketch.add(i)
    truth = {i: ids.count(i) for i in set(ids[:200])}
    assert all(sketch.estimate(i) >= n for i, n in truth.items())
    assert sum(sketch.estimate(i) - n for i, n in truth.items()) < 0.5 * sum(truth.values())  # conservative update
    top = max(truth, key=truth.get)
    sketch.halve()
    assert sketch.estimate(top) <= truth[top] // 2 + 50
    assert CountMinSketch(width=256).estimate("never seen") == 0 and sketch.nbytes == 256 * 4 * 4
    with pytest.raises(ConfigError, match="strings or ints"):
        sketch.add(1.5)


def test_a_new_id_takes_a_row_only_from_an_id_seen_less_often():
    table = IdTable(capacity=2, min_count=1)
    table.observe(["a"] * 5 + ["b"] * 5)
    table.observe(["c", "c", "c"])  # seen 3 times: "a" (5 times, least recently) keeps its row
    assert table.mapping() == {"a": 1, "b": 2} and table.statistics.evicted == 0
    table.observe(["c"] * 3)  # 6 > 5
    assert table.mapping() == {"c": 1, "b": 2}


def test_the_table_admits_at_min_count_and_evicts_the_least_recently_seen():
    table = IdTable(capacity=3, min_count=3)
    assert table.observe(["a", "a", "b", "a"]).tolist() == [0, 0, 0, 1]
    table.observe(["b", "b", "c", "c", "c"])
    assert table.mapping() == {"a": 1, "b": 2, "c": 3}
    assert table.observe(["d"] * 3 + ["b", "c"]).tolist() == [0, 0, 1, 2, 3]  # "a", least recently seen, gives up row 1
    assert table.mapping() == {"d": 1, "b": 2, "c": 3}
    assert [(r.row, r.generation, r.id) for r in table.take_reassignments()] == [
        (1, 1, "a"), (2, 1, "b"), (3, 1, "c"), (1, 2, "d")]
    assert table.take_reassignments() == []
    assert table.lookup(["a", "d", 7]).tolist() == [0, 1, 0]
    s = table.statistics
    assert (s.observed, s.admitted, s.evicted, s.out_of_vocabulary) == (14, 4, 1, 8)


def test_expiry_frees_rows_of_ids_gone_quiet():
    table = IdTable(capacity=10, min_count=1, expire_after=5)
    table.observe(["old", "x", "y"])
    table.observe(["x", "y", "x", "y", "x", "y"])  # "old" last seen 8 ids ago at the start of the next call
    table.observe(["x"])
    assert "old" not in table.mapping() and table.statistics.expired == 1
    assert table.counts[[table.mapping()["x"]]].tolist() == [2]  # 1, halved, +3, halved, +1: counts age every 5 ids


def test_memory_stays_bounded_while_the_stream_brings_ten_times_the_capacity():
    table = IdTable(capacity=300, min_count=2, expire_after=20_000)
    sizes, distinct = [], set()
    rng = np.random.default_rng(1)
    for chunk in range(20):  # ids drift: each chunk brings new ones
        ids = [int(i) + 300 * chunk for i in rng.zipf(1.3, 2000) if i < 2000]
        distinct.update(ids)
        table.observe(ids)
        sizes.append(table.nbytes)
    assert len(distinct) > 10 * table.capacity
    assert len(table) <= table.capacity and max(sizes) <= 1.05 * sizes[len(sizes) // 2]
    assert table.statistics.evicted + table.statistics.expired > 0


def test_a_table_restored_from_its_state_decides_as_the_original():
    ids = _zipf_ids(6000, seed=3)
    table = IdTable(capacity=80, min_count=2, expire_after=1000, spec=TableSpec("items", ("emb",)))
    table.observe(ids[:3000])
    copy = IdTable.from_state(table.state())
    assert copy.mapping() == table.mapping() and copy.spec == table.spec
    assert copy.observe(ids[3000:]).tolist() == table.observe(ids[3000:]).tolist()
    assert copy.take_reassignments() == table.take_reassignments()
    assert copy.state().keys() == table.state().keys()
    with pytest.raises(DataError, match="not the state of an IdTable"):
        IdTable.from_state({"meta": np.frombuffer(b"{}", np.uint8)})


def test_notices_round_trip_and_bad_ones_are_refused():
    notices = {"words": TableNotices(5, ("a", "b"), (Reassignment(1, 2, "cat"), Reassignment(4, 1, 17)))}
    assert decode_notices(encode_notices(notices)) == notices
    message = GradientMessage(0, 1, 1, {"000": np.zeros(2, np.float32)}, notices=notices)
    assert wire.decode_message(wire.encode_message(message)).notices == notices
    assert wire.decode_message(wire.encode_message(GradientMessage(0, 1, 1, {}))).notices == {}
    for bad in ('{"words": {"rows": 5, "layers": ["a"], "reassigned": [[5, 1, "x"]]}}', "[1]", "{",
                '{"w": {"rows": -1, "layers": ["a"], "reassigned": []}}', '{"w": {"rows": 5, "layers": [], "reassigned": []}}',
                '{"w": {"rows": 5, "layers": ["a"], "reassigned": [[1, 1, [1, 2]]]}}',
                '{"w": {"rows": 5, "layers": ["a"], "reassigned": [[1, 1, null]]}}',
                '{"w": {"rows": 5, "layers": ["a"], "reassigned": [[1, 1, true]]}}',
                '{"w": {"rows": 5, "layers": ["a"], "reassigned": [[true, 1, "x"]]}}',
                '{"w": {"rows": 5, "layers": ["a"], "reassigned": [[1, true, "x"]]}}'):
        with pytest.raises(WireFormatError, match="malformed row notices"):
            decode_notices(bad)


def test_row_resets_apply_each_generation_once_and_the_newest_wins():
    resets, calls = RowResets(), []
    reset = lambda table, layers, rows, gens: calls.append((rows.tolist(), gens.tolist()))  # noqa: E731
    older = {"t": TableNotices(4, ("e",), (Reassignment(1, 1, "a"), Reassignment(2, 1, "b")))}
    newer = {"t": TableNotices(4, ("e",), (Reassignment(1, 2, "c"), Reassignment(1, 1, "a")))}
    resets.apply(newer, reset)
    resets.apply(older, reset)
    assert calls == [([1], [2]), ([2], [1])] and resets.mapping("t") == {"c": 1, "b": 2}
    copy = RowResets()
    copy.restore(resets.snapshot())
    assert copy.mapping("t") == resets.mapping("t") and copy.generations["t"].tolist() == [0, 2, 1, 0]
    misfit = {"t": TableNotices(9, ("e",), (Reassignment(1, 3, "d"),))}
    assert "this replica's has 4 rows" in resets.misfit(misfit)
    with pytest.raises(WireFormatError, match="this replica's has 4 rows"):
        resets.apply(misfit, reset)


def test_an_id_that_expires_and_comes_back_holds_one_row_in_every_map():
    table = IdTable(3, min_count=1, expire_after=4, spec=TableSpec("t", ("e",)))
    resets = RowResets()
    for ids in (["x", "b", "a"], ["x"], ["b"] * 5, ["a"]):  # "a" expires, then takes "x"'s row
        table.observe(ids)
        resets.apply({"t": TableNotices(table.rows, ("e",), tuple(table.take_reassignments()))}, None)
    assert table.statistics.expired >= 1 and resets.mapping("t") == table.mapping() == {"a": 1, "b": 2}
    assert resets.maps()["t"]["ids"] == [["a", 1], ["b", 2]]
    sender, receiver = RowResets(), RowResets()  # what a replica passes on keeps the stream's order
    sent = sender.apply({"t": TableNotices(8, ("e",), (Reassignment(5, 1, "X"), Reassignment(3, 1, "X")))}, None)
    receiver.apply(decode_notices(encode_notices(sent)), None)
    assert sender.mapping("t") == receiver.mapping("t") == {"X": 3}
    copy = RowResets()
    copy.restore(resets.snapshot())
    assert copy.mapping("t") == table.mapping()


def test_fresh_rows_depend_on_row_and_generation_only():
    uniform = {"class_name": "RandomUniform", "config": {"minval": -0.1, "maxval": 0.1}}
    a = fresh_rows(uniform, np.array([3, 5]), np.array([1, 1]), 8, [7])
    b = fresh_rows(uniform, np.array([5]), np.array([1]), 8, [7])
    assert np.array_equal(a[1], b[0]) and np.abs(a).max() <= 0.1 and not np.array_equal(a[0], a[1])
    assert not np.array_equal(fresh_rows(uniform, np.array([5]), np.array([2]), 8, [7]), b)
    with pytest.raises(ConfigError, match="Orthogonal initializer cannot be reset"):
        fresh_rows({"class_name": "Orthogonal"}, np.array([1]), np.array([1]), 4, [0])


def test_every_batch_carries_the_window_of_reassignments():
    window = RecentReassignments([(TableSpec("t", ("e",)), 5)], size=3)
    metas = [window.meta({"t": [Reassignment(i + 1, 1, i)]} if i < 2 else {}) for i in range(5)]
    carried = [[r.id for r in decode_notices(m[NOTICES])["t"].reassigned] if m else [] for m in metas]
    assert carried == [[0], [0, 1], [0, 1], [1], []]


def _word(number):
    """A word for a number (tokenize keeps letters only): 0 -> "a", 27 -> "bb"."""
    return "abcdefghijklmnopqrstuvwxyz"[number % 26] * (1 + number // 26)


def _stream_batches(capacity=30, chunks=12, seed=0, **kwargs):
    """Batches of a word stream whose vocabulary drifts past the table's capacity."""
    rng = np.random.default_rng(seed)
    vocabulary = GrowingVocabulary(capacity, min_count=2, batch_size=64, subsample=0, seed=seed, **kwargs)
    batches = []
    for n in range(chunks):
        words = [_word(int(i) + 4 * n) for i in rng.zipf(1.5, 800) if i < 40]
        lines = [" ".join(words[i:i + 8]) for i in range(0, len(words), 8)]
        batches += [wire.decode_batch(b) for b in vocabulary([str(n), "0", *lines])]
    return vocabulary, batches


def _word2vec(rows, optimizer=None):
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    def build():
        model = zoo.word2vec(vocabulary=rows, dim=8, learning_rate=16.0)
        if optimizer is not None:
            model.compile(optimizer=optimizer(), loss=model.loss)
        return model
    return KerasModelAdapter(load_model(build, seed=0))


def test_a_replica_resets_reassigned_rows_and_their_optimizer_slots():
    import keras

    vocabulary, batches = _stream_batches()
    assert vocabulary.table.statistics.evicted > 0
    model = _word2vec(vocabulary.rows, optimizer=lambda: keras.optimizers.Adam(0.01))
    model.train_step(batches[0])
    before = model.get_weights()
    slots = {v.name: v.numpy() for v in model.model.optimizer.variables if len(v.shape) == 2}
    model.reset_rows("words", ("target_embedding", "context_embedding"), np.array([1, 2]), np.array([1, 1]))
    after = model.get_weights()
    assert not np.array_equal(after["000"][1:3], before["000"][1:3]) and np.array_equal(after["000"][3:], before["000"][3:])
    assert np.abs(after["000"][1:3]).max() <= 0.5 / 8
    for v in model.model.optimizer.variables:
        if len(v.shape) == 2:
            assert not v.numpy()[1:3].any() and np.array_equal(v.numpy()[3:], slots[v.name][3:])
    with pytest.raises(Exception, match="which the model does not have"):
        model.reset_rows("words", ("nope",), np.array([1]), np.array([1]))


@pytest.mark.parametrize("bound", [0, 2])
def test_replicas_agree_on_maps_and_synchronous_ones_stay_bit_identical_through_reassignments(bound):
    from pyflink_tensair.core.simulation import simulate

    vocabulary, batches = _stream_batches(notice_window=2)
    assert vocabulary.table.statistics.evicted > 10
    result = simulate(lambda r: _word2vec(vocabulary.rows), batches,
                      TrainConfig(replicas=2, staleness_bound=bound), delivery_delay=1)
    maps = [replica.rows.mapping("words") for replica in result.replicas]
    assert maps[0] == maps[1] == vocabulary.table.mapping()
    assert [r.rows.generations["words"].tolist() for r in result.replicas] == [vocabulary.table.generations.tolist()] * 2
    if bound == 0:
        assert result.replica_max_weight_diff() == 0.0
    restored = RowResets()
    restored.restore(result.replicas[1].snapshot())
    assert restored.mapping("words") == maps[1]


def test_three_synchronous_replicas_stay_bit_identical_when_one_link_lags():
    """With three replicas a peer's step k (and its row notices) can reach a replica before that
    replica's step k - 1 is complete; the notices must wait for step k's average."""
    import collections

    from pyflink_tensair.core import Replica
    from pyflink_tensair.core.events import Broadcast

    vocabulary, batches = _stream_batches(chunks=4, notice_window=3)
    assert vocabulary.table.statistics.evicted > 0
    nodes = [Replica(r, _word2vec(vocabulary.rows), TrainConfig(replicas=3, staleness_bound=0)) for r in range(3)]
    queue, lagging = collections.deque(), []  # messages from replica 2 to replica 1 wait a round

    def route(sender, events, lag=True):
        for event in events:
            if isinstance(event, Broadcast):
                message = wire.decode_message(wire.encode_message(event.message))
                for peer in {0, 1, 2} - {sender}:
                    (lagging if lag and (sender, peer) == (2, 1) else queue).append((peer, message))

    held = []  # replica 1's held notices survive a snapshot

    def deliver(lag=True):
        while queue:
            peer, message = queue.popleft()
            route(peer, nodes[peer].on_gradient(message), lag)
            if peer == 1 and nodes[1].rule.notices and not held:
                copy = Replica(1, _word2vec(vocabulary.rows), TrainConfig(replicas=3, staleness_bound=0))
                copy.restore(nodes[1].snapshot())
                held.append(copy.rule.notices == nodes[1].rule.notices)

    for t in range(0, len(batches) - 2, 3):
        for r in range(3):
            route(r, nodes[r].on_batch(batches[t + r]))
            deliver()
            if r == 0:  # replica 1 hears replica 2's previous step only now, after replica 0's next one
                queue.extend(lagging)
                lagging.clear()
                deliver()
    queue.extend(lagging)
    deliver(lag=False)
    for node in nodes:
        route(node.id, node.on_input_end(), lag=False)
    deliver(lag=False)
    assert held == [True]
    assert all(node.finished for node in nodes) and len({node.model_version for node in nodes}) == 1
    weights = [node.model.get_weights() for node in nodes]
    assert all(np.array_equal(weights[0][name], other[name]) for other in weights[1:] for name in weights[0])
    assert nodes[0].rows.mapping("words") == nodes[1].rows.mapping("words") == nodes[2].rows.mapping("words")


def test_a_malformed_notice_makes_the_batch_a_dead_letter():
    from pyflink_tensair.core import Replica

    _, batches = _stream_batches(chunks=1)
    replica = Replica(0, _word2vec(31), TrainConfig(replicas=1))
    bad = Batch(batches[0].x, batches[0].y, {**batches[0].meta, NOTICES: "{"})
    events = replica.on_batch(bad)
    assert replica.dead_letters == 1 and not replica.rows.generations
    assert any("malformed row notices" in getattr(e, "detail", "") for e in events)
    replica.on_batch(batches[0])
    other = {"words": TableNotices(7, ("target_embedding", "context_embedding"), (Reassignment(1, 9, "zz"),))}
    events = replica.on_batch(Batch(batches[0].x, batches[0].y, {**batches[0].meta, NOTICES: encode_notices(other)}))
    assert replica.dead_letters == 2 and any("this replica's has 31 rows" in getattr(e, "detail", "") for e in events)


def test_a_peer_message_whose_notices_do_not_fit_is_refused_not_applied():
    from pyflink_tensair.core import Replica

    _, batches = _stream_batches(chunks=1)
    replica = Replica(0, _word2vec(31), TrainConfig(replicas=2))
    replica.on_batch(batches[0])
    generations = replica.rows.generations["words"].copy()
    gradients = {name: np.zeros(shape, np.float32) for name, shape in replica.steps.shapes.items()}
    other = {"words": TableNotices(7, ("target_embedding",), (Reassignment(1, 9, "zz"),))}
    replica.on_gradient(wire.decode_message(wire.encode_message(GradientMessage(1, 1, 1, gradients, notices=other))))
    assert replica.messages_rejected == 1 and replica.dead_letters == 1
    assert np.array_equal(replica.rows.generations["words"], generations)
    # synchronous replicas hold peers' notices until the step's average: checked against each other too
    replica = Replica(0, _word2vec(31), TrainConfig(replicas=3, staleness_bound=0))
    fits = {"words": TableNotices(31, ("target_embedding", "context_embedding"), (Reassignment(1, 1, "a"),))}
    for sender, notices in ((1, fits), (2, other)):
        replica.on_gradient(wire.decode_message(wire.encode_message(GradientMessage(sender, 1, 1, gradients,
                                                                                    notices=notices))))
    assert replica.messages_rejected == 1 and replica.rule.notices == {1: {1: fits}}


def test_id_columns_make_one_batch_per_chunk_with_both_tables_notices_and_restore_exactly():
    from pyflink_tensair.embeddings import IdColumnBatches

    make = IdColumnBatches(("user", "item"), {"user": 3, "item": 2}, min_count=1, notice_window=2)
    chunk = ["4", "40", "u1,i1,1", "u2,i1,0", "u1,,1", "u3,i2,nan", "u3,i2,1"]
    made = list(make(chunk))
    letters = [wire.decode_dead_letter(m) for m in made if wire.peek_kind(m) == wire.KIND_DEAD_LETTER]
    assert [(l.reason, l.position) for l in letters] == [("not_a_record", 42), ("not_a_record", 43)]
    batch = wire.decode_batch(made[-1])
    assert batch.id == 4 and batch.x["user"].tolist() == [1, 2, 3] and batch.x["item"].tolist() == [1, 1, 2]
    assert batch.y.tolist() == [[1.0], [0.0], [1.0]]
    notices = batch_notices(batch)
    assert {name: [r.id for r in n.reassigned] for name, n in notices.items()} == {"user": ["u1", "u2", "u3"],
                                                                                 "item": ["i1", "i2"]}
    assert notices["user"].layers == ("user_embedding",) and notices["item"].rows == make.rows("item") == 3
    copy = IdColumnBatches(("user", "item"), {"user": 3, "item": 2}, min_count=1, notice_window=2)
    copy.restore(make.state())
    later = ["5", "47", "u4,i3,1", "u4,i3,0", "u1,i1,1"]
    assert [wire.decode_batch(b).x["user"].tolist() for b in copy(later)] == \
        [wire.decode_batch(b).x["user"].tolist() for b in make(later)]
    with pytest.raises(ConfigError, match="one entry per column"):
        IdColumnBatches(("user", "item"), {"user": 3})


def test_the_click_stream_is_seeded_brings_new_ids_and_a_click_model_learns_it_through_tables():
    from pyflink_tensair.core import Replica
    from pyflink_tensair.datasets import ZipfClicks
    from pyflink_tensair.embeddings import IdColumnBatches
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    stream = ZipfClicks(user_ranks=500, item_ranks=100, item_churn=0.02, seed=1)
    a, b = stream.events(1000, 3000), stream.events(2000, 100)
    assert all(np.array_equal(x[1000:1100], y) for x, y in zip(a, b))
    early, late = set(stream.events(0, 2000)[1]), set(stream.events(8000, 2000)[1])
    assert len(late - early) > 50  # new items appear, old ones fade
    make = IdColumnBatches(("user", "item"), 200, min_count=2, notice_window=1)
    model = KerasModelAdapter(load_model(functools.partial(zoo.click_model, users=201, items=201, dim=8, hidden=16)))
    replica = Replica(0, model, TrainConfig(replicas=1, updates=ModelUpdates(every_ms=1e9, every_steps=1)))
    view = ModelView(KerasModelAdapter(load_model(functools.partial(zoo.click_model, users=201, items=201, dim=8,
                                                                    hidden=16), seed=3)))
    losses = []
    for n in range(60):
        users, items, clicks = stream.events(n * 128, 128)
        for data in make([str(n), str(n * 128), *(f"{u},{i},{c}" for u, i, c in zip(users, items, clicks))]):
            for event in replica.on_batch(wire.decode_batch(data)):
                if isinstance(event, ModelUpdate):  # a server's view follows the maps with the weights
                    assert view.apply(decode_update(encode_update(event)))
                elif getattr(event, "phase", None) == "batch":
                    losses.append(event.loss)
    assert make.tables["item"].statistics.evicted > 0 and replica.dead_letters == 0
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.03
    assert replica.rows.mapping("item") == make.tables["item"].mapping() == view.id_rows["item"]
    assert view.id_rows["user"] == make.tables["user"].mapping() and view.version == replica.model_version
