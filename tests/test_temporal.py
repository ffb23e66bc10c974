"""Temporal building blocks on plain arrays: DTW 3-sigma, durations, stage rules."""

import warnings

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from l4 import iterations, stage, stepclock
from l4.profiles import choose_profile, load_profiles


def test_dtw_flags_the_iteration_whose_events_change():
    seq = np.array([1, 2, 3] * 60 + [1, 9, 9, 3] + [1, 2, 3] * 10, dtype=np.uint32)
    pos = np.nonzero(seq == 3)[0]
    rarity = np.zeros(12)
    rarity[9] = 5.0
    hits = iterations.dtw_anomalies(seq, pos, np.arange(1, len(pos) + 1, dtype=float), rarity)
    assert [it for it, _ in hits] == [61]


def test_duration_flags_a_slow_spell_but_not_jitter():
    rng = np.random.default_rng(0)
    steps = np.r_[rng.normal(10, 0.3, 40), [40, 41, 39], rng.normal(10, 0.3, 10)]
    ts = np.cumsum(steps)
    nums = np.arange(1, len(ts) + 1, dtype=float)
    hits = [it for it, _ in iterations.duration_anomalies(nums, ts)]
    assert hits[:3] == [41, 42, 43]
    calm = np.cumsum(rng.normal(10, 0.3, 60))
    assert iterations.duration_anomalies(np.arange(60.0), calm) == []


def test_a_throttle_began_where_its_first_step_rose_above_the_usual_time():
    """13 %, 31 %, 49 %, 77 % slower: the 3-sigma rule (10 % floor) first fires late in the
    rise; the slowdown began at its first step above the node's usual jitter."""
    rng = np.random.default_rng(2)
    usual = rng.normal(6640, 6, 40)
    rise = [7481, 8699, 9893, 11729, 14415, 12273, 15820, 14439]
    nums = np.arange(10, 10 * (len(usual) + len(rise)) + 10, 10, dtype=float)
    ts = np.cumsum(np.r_[usual, rise]) / 1000
    hits = iterations.duration_anomalies(nums, ts)
    first = iterations._first_run(hits, 10)
    assert first is not None and first > 410
    assert iterations.slow_onset(nums, ts, first) == 410.0
    # jitter of a few percent is no onset: a node whose steps vary by 3 % starts at the rise
    noisy = np.cumsum(np.r_[rng.normal(2000, 60, 40), [2380, 2980, 3105, 3442, 4252, 5403]])
    first = iterations._first_run(iterations.duration_anomalies(nums[:46], noisy), 10)
    assert first is not None and iterations.slow_onset(nums[:46], noisy, first) == 410.0


def test_a_slowdown_that_lasts_to_the_end_is_told_from_a_passing_one():
    rng = np.random.default_rng(1)
    nums = np.arange(1, 61, dtype=float)
    lasting = np.cumsum(np.r_[rng.normal(2, 0.05, 40), rng.normal(10, 0.3, 20)])
    assert iterations._slow_to_the_end(nums, lasting, 41)
    passing = np.cumsum(np.r_[rng.normal(2, 0.05, 40), rng.normal(10, 0.3, 5),
                              rng.normal(2, 0.05, 15)])
    assert not iterations._slow_to_the_end(nums, passing, 41)


def test_a_streak_that_lasts_to_the_end_marks_where_the_fault_began():
    # iteration k's records: routine event 1, then the counter line (event 3); from
    # iteration 41 on an alarming event 7 (an fp16 overflow) comes every time
    seq, pos = [], []
    for k in range(1, 61):
        seq += [1, 7] if k >= 41 else [1]
        if k == 10:
            seq.append(7)  # one overflow early in training is normal
        pos.append(len(seq))
        seq.append(3)
    seq, pos = np.array(seq, dtype=np.uint32), np.array(pos)
    alarming = np.zeros(8, dtype=bool)
    alarming[7] = True
    nums = np.arange(1, 61, dtype=float)
    assert iterations.streak_onset(seq, pos, nums, alarming) == 41
    assert iterations.streak_onset(seq, pos, nums, np.zeros(8, dtype=bool)) is None


def test_a_rank_number_is_not_an_iteration_counter():
    # "[Rank 12] using GPU 4 ...": every node prints its own ranks, once each
    assert iterations._counts_ranks([{0.0, 1.0, 2.0, 3.0}, {4.0, 5.0, 6.0, 7.0}, {8.0, 9.0}])
    # "iteration 120/500": the same numbers wherever they are printed
    assert not iterations._counts_ranks([{1.0, 2.0, 3.0}, {1.0, 2.0, 3.0, 4.0}])
    # one node only: cannot tell, keep it (Megatron prints iterations on the last rank)
    assert not iterations._counts_ranks([set(range(100))])


def test_spikes_on_a_schedule_are_periodic_but_a_lone_one_is_not():
    assert iterations._periodic([26, 51, 76, 101, 87], 1.0) == {26, 51, 76, 101}
    assert iterations._periodic([26, 87], 1.0) == set()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.5, 100), min_size=0, max_size=80))
def test_duration_never_fails_on_any_series(steps):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ts = np.cumsum(np.asarray(steps, dtype=float))
        out = iterations.duration_anomalies(np.arange(len(ts), dtype=float), ts)
    assert all(z > iterations.SIGMA for _, z in out)


def test_stage_rules_are_data_and_training_does_not_go_back():
    prof = load_profiles()["megatron"]
    templates = ["using world size: <*>", "> building train, validation, and test datasets ...",
                 "building GPT model ...", "iteration <*>/ <*> | consumed samples: <*> |",
                 "saving checkpoint at iteration <*> to <PATH>", "> building train, validation, and test datasets ..."]
    stages = [prof.stage_of(t) for t in templates]
    assert stages == ["initialization", "data_loading", "model_loading", "training",
                      "checkpointing", "data_loading"]
    seq = np.array([0, 1, 2, 3, 3, 4, 3, 5], dtype=np.uint32)
    assert stage.stage_at(seq, 5, stages) == "training"
    assert stage.stage_at(seq, 6, stages) == "checkpointing"
    assert stage.stage_at(seq, 8, stages) == "training"  # datasets again: ignored
    assert stage.stage_at(seq, 2, stages) == "data_loading"


def test_profile_chosen_from_job_json_or_lines():
    assert choose_profile([], "Megatron-LM").name == "megatron"
    assert choose_profile(["[titan] <TS> - root - INFO - step: <*> loss: <*> mfu: <*>%"]).name == "torchtitan"
    assert choose_profile(["nothing known here"]).name == "generic"


def _track(slow_from: int, n: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nums = np.arange(1, n + 1, dtype=float)
    dur = np.where(nums >= slow_from, 1.6, 0.1) + np.random.default_rng(slow_from).uniform(0, 0.01, n)
    return np.arange(n), nums, np.cumsum(dur)


def test_the_node_that_slowed_a_step_before_the_others_is_singled_out():
    from types import SimpleNamespace

    job = SimpleNamespace(n_nodes=4)
    lead = iterations.Counter(0, [0], {0: _track(21), 1: _track(21), 2: _track(20), 3: _track(21)}, 1.0)
    assert iterations.slowed_first(job, lead).tolist() == [0.0, 0.0, 1.0, 0.0]
    together = iterations.Counter(0, [0], {i: _track(21) for i in range(4)}, 1.0)
    assert iterations.slowed_first(job, together).tolist() == [0.0] * 4


def _upto(last: int, every: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nums = np.arange(every, last + 1, every, dtype=float)
    return np.arange(len(nums)), nums, np.full(len(nums), np.nan)


def test_the_one_counter_behind_all_others_stopped_first():
    """Step-locked peers finish at most the step they were in: the one node behind a pack
    that ended together is singled out; anything less clear singles out nobody."""
    def behind(*lasts: int, every: int = 1) -> list[float]:
        tracks = {i: _upto(last, every) for i, last in enumerate(lasts)}
        return iterations.stopped_counting_first(len(lasts), iterations.Counter(0, [0], tracks, float(every))).tolist()

    assert behind(33, 33, 32, 33) == [0.0, 0.0, 1.0, 0.0]
    assert behind(34, 33, 32, 33) == [0.0, 0.0, 1.0, 0.0]  # the pack within one step
    assert behind(300, 300, 290, 300, every=10) == [0.0, 0.0, 1.0, 0.0]  # printed every 10 steps
    assert behind(33, 33, 33, 33) == [0.0] * 4  # all together: nobody
    assert behind(33, 32, 32, 33) == [0.0] * 4  # two behind: not one node
    assert behind(40, 33, 32, 36) == [0.0] * 4  # a pack that did not end together
    assert behind(33, 32) == [0.0] * 2  # two nodes: either may be behind
    assert iterations.stopped_counting_first(3, None).tolist() == [0.0] * 3


def _iterations(flaps: set[int], n: int = 60, early: int | None = None):
    """Records of ``n`` iterations: routine event 1, event 7 (a link's "port error") in the
    iterations ``flaps`` (and once at ``early``), then the counter line (event 3)."""
    seq, pos = [], []
    for k in range(1, n + 1):
        seq += [1, 7] if k in flaps or k == early else [1]
        pos.append(len(seq))
        seq.append(3)
    unusual = np.zeros(8, dtype=bool)
    unusual[7] = True
    return np.array(seq, dtype=np.uint32), np.array(pos), np.arange(1, n + 1, dtype=float), unusual


def test_a_link_that_flaps_until_it_fails_began_at_its_first_flap():
    seq, pos, nums, unusual = _iterations({44, 45, 47, 51, 55, 58})
    assert iterations.recurring_onset(seq, pos, nums, unusual) == 44
    # nothing unusual that came back: no onset
    assert iterations.recurring_onset(seq, pos, nums, np.zeros(8, dtype=bool)) is None
    # twice is no pattern; a flap spell that ended long before the failure is over
    assert iterations.recurring_onset(*_iterations({44, 58})) is None
    assert iterations.recurring_onset(*_iterations({20, 21, 23, 25})) is None
    # seen a few iterations before: the spell began there; seen once long before, with a
    # clean stretch between: the spell began at its own first flap
    assert iterations.recurring_onset(*_iterations({41, 44, 45, 47, 51, 55, 58}, early=38)) == 38
    assert iterations.recurring_onset(*_iterations({44, 45, 47, 51, 55, 58}, early=12)) == 44
    # a stray error now and then (a metrics push failing three times in 20 iterations) is
    # no spell
    assert iterations.recurring_onset(*_iterations({40, 49, 57})) is None


def test_the_step_in_progress_is_read_from_the_time_since_the_last_logged_one():
    """Logged every 10 steps, 4.2 s a step; the error came 19.9 s after "step 310": the job
    would print 320 for that interval, and the step itself was 315."""
    nums = np.arange(10, 320, 10, dtype=float)
    ts = 1000.0 + 4.2 * nums
    counter = iterations.Counter(marker=0, cols=[0], tracks={0: (np.arange(len(nums)), nums, ts)},
                                 step=10.0)
    t_f = float(ts[-1] + 19.9)
    assert stepclock.step_in_progress(counter, 0, t_f, 320.0) == 315.0
    # long after (a hang that timed out): more steps than the interval holds, so the time
    # says nothing of which step it was (the interval's end is already the first answer)
    assert stepclock.step_in_progress(counter, 0, float(ts[-1] + 1800), 320.0) is None
    # just past the interval's end (clocks a second apart): the end
    assert stepclock.step_in_progress(counter, 0, float(ts[-1] + 4.2 * 10.5), 320.0) == 320.0
    # without a clock on the failure, or logged every step, nothing to add
    assert stepclock.step_in_progress(counter, 0, float("nan"), 320.0) is None
    every = iterations.Counter(marker=0, cols=[0], tracks={0: (np.arange(len(nums)), nums, ts)},
                               step=1.0)
    assert stepclock.step_in_progress(every, 0, t_f, 311.0) is None
