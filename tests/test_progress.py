"""The driver's view of a running job's files (pyflink_tensair.cli.progress)."""

from pyflink_tensair.cli.progress import LinesFollower


def test_a_follower_reads_whole_lines_and_reads_on_after_a_restore_cut_the_file_back(tmp_path):
    path = tmp_path / "score-0.jsonl"
    follower = LinesFollower(str(tmp_path), "score")
    path.write_text('{"n": 0}\n{"n": 1}\n{"n": 2')  # the last line still being written
    assert follower.poll() == [{"n": 0}, {"n": 1}]
    with open(path, "a") as f:
        f.write('}\n{"n": 3}\n')
    assert follower.poll() == [{"n": 2}, {"n": 3}]
    with open(path, "r+") as f:  # a restore cuts back to the checkpoint's length (after n = 0)
        f.truncate(len('{"n": 0}\n'))
    with open(path, "a") as f:  # and the replay writes on from there (a line the same as one read is not new)
        f.write('{"n": 1, "again": 1}\n{"n": 2')
    assert follower.poll() == [{"n": 1, "again": 1}]
    with open(path, "a") as f:
        f.write('}\n')
    assert follower.poll() == [{"n": 2}]
    assert [r["n"] for r in follower.records] == [0, 1, 2, 3, 1, 2]
