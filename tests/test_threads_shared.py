"""SharedCpuThreads: fewer threads while the process's threads are being preempted, all of them
again once they are not (a fake clock and switch counter stand in for the kernel's)."""

from model_core.threads import SharedCpuThreads, involuntary_switches


class Fake:
    def __init__(self):
        self.now, self.switches = 0.0, 0

    def batch(self, policy: SharedCpuThreads, seconds: float, switches: int) -> int:
        threads = policy.before_batch()
        self.now += seconds
        self.switches += switches
        policy.after_batch()
        return threads


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


def test_the_kernel_counter_is_readable_and_never_decreases():
    first = involuntary_switches()
    assert first >= 0
    sum(i * i for i in range(200_000))
    assert involuntary_switches() >= first
