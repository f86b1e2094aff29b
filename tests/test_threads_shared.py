"""SharedCpuThreads: fewer threads while the process's threads are being preempted, all of them
again once they are not (a fake clock and switch counter stand in for the kernel's)."""

import pytest
import torch

from model_core.threads import SharedCpuThreads, involuntary_switches


class Fake:
    def __init__(self):
        self.now, self.switches = 0.0, 0

    def batch(
        self, policy: SharedCpuThreads, seconds: float, switches: int, work: float | None = None
    ) -> int:
        threads = policy.before_batch()
        self.now += seconds
        self.switches += switches
        policy.after_batch(work)
        return threads

    def batches(
        self,
        policy: SharedCpuThreads,
        count: int,
        seconds: float,
        switches: int,
        work: dict[int, float],
    ) -> list[int]:
        """`count` batches, each doing the work its thread count allows: their counts."""
        seen = []
        for _ in range(count):
            threads = policy.before_batch()
            self.now += seconds
            self.switches += switches
            policy.after_batch(work[threads])
            seen.append(threads)
        return seen


def make(most: int, fake: Fake) -> SharedCpuThreads:
    return SharedCpuThreads(
        most,
        rate=50.0,
        least=5,
        window_s=0.1,
        hold_s=2.0,
        counter=lambda: fake.switches,
        clock=lambda: fake.now,
    )


def test_an_idle_machine_keeps_every_thread():
    fake = Fake()
    policy = make(2, fake)
    # a few switches now and then (kernel housekeeping) are not competition: as measured idle,
    # 0-3 in a 7 ms batch, ~10 per second of batches
    pattern = [0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0]
    assert [fake.batch(policy, 0.007, n) for n in pattern * 4] == [2] * 60


def test_preemption_halves_the_threads_until_the_hold_ends_then_probes_all_again():
    fake = Fake()
    policy = make(8, fake)
    # 2 switches per 14 ms batch (~140 per second, as measured with a busy core): each
    # window of 0.1 s halves the count, down to one thread
    seen = [fake.batch(policy, 0.014, 2) for _ in range(40)]
    assert seen[0] == 8 and seen[-1] == 1
    assert sorted(set(seen), reverse=True) == [8, 4, 2, 1]
    fake.now += 1.0  # within the hold: the last judgement renewed it
    assert fake.batch(policy, 0.014, 0) == 1
    fake.now += 2.0  # the hold has passed: all threads again, and they stay while undisturbed
    assert [fake.batch(policy, 0.007, 0) for _ in range(50)] == [8] * 50


def test_one_long_preempted_batch_is_judged_alone():
    fake = Fake()
    policy = make(2, fake)
    assert fake.batch(policy, 1.0, 20) == 2  # 20 switches in a second: below the rate
    assert fake.batch(policy, 0.01, 0) == 2
    assert fake.batch(policy, 1.0, 80) == 2  # 80 in a second: above it
    assert fake.batch(policy, 0.01, 0) == 1


def test_fewer_threads_stay_only_where_they_prove_faster():
    """Neighbours that yield (a load generator, the event loop) preempt as often as one that
    spins, but there two threads do more work per second: the trial of one thread fails, the
    count goes back, and the next trial waits, longer after each failure."""
    fake = Fake()
    policy = make(2, fake)

    def window(work_per_batch: dict[int, float]) -> list[int]:
        """A window (0.105 s) of ten batches, 2 switches each; each does the work its thread
        count allows. Returns the thread counts they ran on."""
        seen = []
        for _ in range(10):
            threads = policy.before_batch()
            fake.now += 0.0105
            fake.switches += 2
            policy.after_batch(work_per_batch[threads])
            seen.append(threads)
        return seen

    yielding = {2: 16.0, 1: 10.0}  # two threads 1.6x the work of one
    assert window(yielding) == [2] * 10  # preempted: the next window tries one thread
    assert window(yielding) == [1] * 10  # slower: back to two
    assert window(yielding) == [2] * 10
    fake.now += 4.0  # within the 5 s wait: no new trial
    assert window(yielding) == [2] * 10
    fake.now += 1.0  # the wait is over: one more trial, which fails again
    assert window(yielding) == [2] * 10 and window(yielding) == [1] * 10
    assert window(yielding) == [2] * 10
    assert policy.no_trial_until - fake.now > 9.0  # and the next wait is 10 s

    spinning = {2: 6.0, 1: 10.0}  # a core kept busy: one thread does more
    fake.now += 11.0
    assert window(spinning) == [2] * 10 and window(spinning) == [1] * 10
    assert window(spinning) == [2] * 10  # two threads once more, to compare with
    assert window(spinning) == [1] * 10  # it proved faster: it stays for the hold
    assert window(spinning) == [1] * 10
    fake.now += 2.5  # the hold is over: two threads again, then another trial
    assert [window(spinning)[0] for _ in range(3)] == [2, 1, 2]
    assert policy.until - fake.now > 3.5  # it passed again: the hold doubled (4 s)
    assert window(spinning) == [1] * 10


def test_a_change_of_traffic_during_a_trial_is_no_verdict():
    """The work per second of a window depends on the batches in it: traffic ramping up while
    one thread is tried makes that window look faster than the one before. The window after
    it, on two threads again, shows the ramp, and the count stays."""
    fake = Fake()
    policy = make(2, fake)
    ramp = iter([{2: 6.0}, {1: 10.0}, {2: 16.0}] + [{2: 16.0, 1: 10.0}] * 10)
    seen = []
    for work in ramp:  # windows of ten batches, 2 switches each
        seen += fake.batches(policy, 10, 0.0105, 2, work)
    assert seen[:30] == [2] * 10 + [1] * 10 + [2] * 10
    assert seen[30:] == [2] * 100  # the trial failed: the next one waits 5 s


def test_fewer_threads_must_be_clearly_faster():
    """Windows of the same count differ by a few percent: one thread slightly ahead of both
    windows of two is not enough."""
    fake = Fake()
    policy = make(2, fake)
    work = {2: 10.0, 1: 11.0}
    seen = fake.batches(policy, 60, 0.0105, 2, work)
    assert seen[:30] == [2] * 10 + [1] * 10 + [2] * 10 and seen[30:] == [2] * 30


def test_a_count_that_proved_faster_is_judged_again_while_preemptions_go_on():
    """Preemptions go on under a yielding neighbour whatever the count: they alone must not
    keep fewer threads for good."""
    fake = Fake()
    policy = make(2, fake)
    work = {2: 6.0, 1: 10.0}
    seen = []
    for _ in range(700):  # 7.35 s of back-to-back batches, all preempted
        threads = policy.before_batch()
        fake.now += 0.0105
        fake.switches += 2
        policy.after_batch(work[threads])
        seen.append(threads)
        if len(seen) == 300:
            work = {2: 16.0, 1: 10.0}  # the neighbour now yields: two threads do more
    assert seen[:10] == [2] * 10 and seen[300:310] == [1] * 10  # held (2 s, then 4 s)
    assert seen[-10:] == [2] * 10  # the hold ran out and one thread no longer proved faster


def test_a_trial_left_unfinished_when_the_traffic_stops_is_dropped():
    fake = Fake()
    policy = make(2, fake)
    for _ in range(10):  # a preempted window: the next batches are a trial of one thread
        fake.batch(policy, 0.0105, 2, 16.0)
    assert fake.batch(policy, 0.0105, 2, 10.0) == 1
    fake.now += 30.0  # no traffic for 30 s, then a batch: the old trial says nothing now
    assert fake.batch(policy, 0.0105, 0, 16.0) == 2


def test_a_batch_that_raised_is_not_counted():
    from app.engine import Engine

    calls = []

    class Policy:
        def before_batch(self):
            return torch.get_num_threads()

        def after_batch(self, work):
            calls.append(work)

    class Owner:
        threads = Policy()

    with Engine.threads_for_batch(Owner()) as batch:
        batch.work = 7.0
    with pytest.raises(RuntimeError), Engine.threads_for_batch(Owner()) as batch:
        batch.work = 3.0
        raise RuntimeError("a failed batch")
    assert calls == [7.0]


def test_the_kernel_counter_is_readable_and_never_decreases():
    first = involuntary_switches()
    assert first >= 0
    sum(i * i for i in range(200_000))
    assert involuntary_switches() >= first


def test_a_trial_of_batches_longer_than_the_stale_limit_is_judged():
    """A batch of many long sentences can take longer than `stale_s` (1 s) alone: each window
    of the trial is then one batch, and the trial still reaches its verdict."""
    fake = Fake()
    policy = make(2, fake)
    work = {2: 1.0, 1: 4.0}  # a spinning neighbour: one thread does 4x the work
    seen = fake.batches(policy, 14, 1.2, 200, work)
    assert seen[:3] == [2, 1, 2]  # before, the trial, after
    assert seen[3:5] == [1, 1]  # it proved faster: held for 2 s
    assert seen[5:8] == [2, 1, 2]  # judged again, and it passes again
    assert seen[8:] == [1, 1, 1, 1, 2, 1]  # held for 4 s
