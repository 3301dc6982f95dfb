"""The two-rank launch's hang watch (tests/two_ranks.py): a job is stopped for what its ranks do (no CPU used: a
deadlock; too much CPU: a livelock), never for how long a slow or loaded machine takes."""
from tests.two_ranks import HangWatch


def test_a_slow_job_that_keeps_working_is_never_called_hung():
    watch = HangWatch(idle_window_s=60, idle_cpu_s=1.0, job_cpu_limit_s=1000)
    # an hour of wall time at a quarter of a core: slow, never idle, under the CPU budget
    assert all(watch.hung(now=t, cpu=0.25 * t, job="fsdp") is None for t in range(0, 3600, 2))


def test_ranks_that_sit_idle_for_the_window_are_a_deadlock():
    watch = HangWatch(idle_window_s=60, idle_cpu_s=1.0, job_cpu_limit_s=1000)
    for t in range(0, 100, 2):  # working
        assert watch.hung(now=t, cpu=t / 2, job="fsdp") is None
    verdicts = [watch.hung(now=t, cpu=50.0 + (t - 100) / 1000, job="fsdp") for t in range(100, 200, 2)]
    first = next(i for i, v in enumerate(verdicts) if v)
    assert 56 <= 2 * first <= 62  # about one window after the work stopped
    assert "no CPU for 60 s (deadlock)" in verdicts[first]


def test_a_new_job_starts_its_own_window_and_cpu_budget():
    watch = HangWatch(idle_window_s=60, idle_cpu_s=1.0, job_cpu_limit_s=100)
    for t in range(0, 50, 2):
        assert watch.hung(now=t, cpu=1.9 * t, job="fsdp") is None  # 93 CPU s: under the budget
    # the next job starts idle (waiting on its group) and uses 90 CPU s more: neither hung nor over budget
    assert all(watch.hung(now=t, cpu=93 + (t - 50) * 0.9, job="token_budget") is None for t in range(50, 150, 2))


def test_a_job_over_its_cpu_budget_is_a_livelock():
    watch = HangWatch(idle_window_s=60, idle_cpu_s=1.0, job_cpu_limit_s=100)
    verdicts = [watch.hung(now=t, cpu=2.0 * t, job="spin") for t in range(0, 80, 2)]
    assert verdicts[:26] == [None] * 26 and verdicts[-1] == "it used over 100 CPU s"
